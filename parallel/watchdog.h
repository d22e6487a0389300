// parallel/watchdog.h: a thread that calls a handler when the training loop has not moved for too long.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>

namespace rn50::parallel {

// In a data-parallel run a rank that died leaves the others blocked somewhere in a collective: in NCCL's
// kernels replayed from a CUDA graph (outside NCCL's own watchdog), behind them in a host sync, or in a full
// launch queue. Wherever the loop is stuck, this thread sees that beat() has not been called for `timeout`
// and calls `on_stall` once (the trainer logs and ends the process).
class Watchdog {
 public:
  Watchdog(std::chrono::milliseconds timeout, std::function<void()> on_stall);
  ~Watchdog();
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  void beat() { last_beat_ns_.store(now_ns(), std::memory_order_relaxed); }

 private:
  static int64_t now_ns() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }
  void run();

  const std::chrono::milliseconds timeout_;
  const std::function<void()> on_stall_;
  std::atomic<int64_t> last_beat_ns_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace rn50::parallel
