// parallel/watchdog.cpp: the stall-watching thread.
#include "parallel/watchdog.h"

#include <algorithm>

namespace rn50::parallel {

Watchdog::Watchdog(std::chrono::milliseconds timeout, std::function<void()> on_stall)
    : timeout_(timeout), on_stall_(std::move(on_stall)), last_beat_ns_(now_ns()) {
  thread_ = std::thread([this] { run(); });
}

Watchdog::~Watchdog() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

void Watchdog::run() {
  // Checks a few times per timeout, at least every second.
  const auto period =
      std::min<std::chrono::milliseconds>(std::chrono::milliseconds(1000), timeout_ / 4 + std::chrono::milliseconds(1));
  std::unique_lock<std::mutex> lock(mutex_);
  while (!wake_.wait_for(lock, period, [this] { return stopping_; })) {
    const auto silent = std::chrono::nanoseconds(now_ns() - last_beat_ns_.load(std::memory_order_relaxed));
    if (silent > timeout_) {
      on_stall_();
      return;
    }
  }
}

}  // namespace rn50::parallel
