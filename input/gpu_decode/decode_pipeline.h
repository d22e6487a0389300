// input/gpu_decode/decode_pipeline.h: DecodePipeline, the GPU decoder's thread and the cycle of its slots, without
// CUDA: the decoder plugs in its work (decode a batch into a slot; whether the device is done with a slot; wait for
// that and hand the slot's batch back). Header-only, so that tests/input/gpu_decode/test_decode_pipeline.cpp runs it on
// any machine.
#pragma once

#include <algorithm>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <utility>
#include <vector>

namespace rn50::input {

// Batches are numbered in submit order; batch b decodes into slot b % slots, on the pipeline's thread, and is
// finished (made into input by the caller) in the same order. A slot is reused once the caller has finished its
// previous batch and the device is done with it.
template <class Job>
class DecodePipeline {
 public:
  struct Work {
    std::function<void()> on_thread_start;  // on the decode thread, first (a throw stops it: see `fatal` below)
    // On the decode thread: batch `number` into `slot`. A throw fails that batch: handed to `hand_back` there, and
    // thrown by its wait_decoded.
    std::function<void(const Job&, int slot, uint64_t number)> decode;
    std::function<void(const Job&)> hand_back;  // a failed batch's job, right after its decode threw
    std::function<bool(int slot)> device_done;  // without waiting: is the device done with the slot's last batch?
    // Waits for the device to be done with the slot's last batch and hands that batch back, even when the wait
    // fails (then throws). Outside the pipeline's lock, on the decode thread or in drain().
    std::function<void(int slot)> retire;
  };

  DecodePipeline(int slots, Work work) : work_(std::move(work)), states_(slot_count(slots), State::kFree) {
    thread_ = std::thread([this] { run(); });
  }
  // The owner abandons first (work the thread is doing may use the owner's memory).
  ~DecodePipeline() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
    }
    changed_.notify_all();
    thread_.join();
  }
  DecodePipeline(const DecodePipeline&) = delete;
  DecodePipeline& operator=(const DecodePipeline&) = delete;

  int slots() const { return static_cast<int>(states_.size()); }

  // Queues a batch for the decode thread and returns. More than slots() batches submitted and not finished is a
  // std::logic_error; after a fatal error this throws that error.
  void submit(Job job) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (fatal_) std::rethrow_exception(fatal_);
      if (submitted_ - finished_ >= static_cast<uint64_t>(slots()))
        throw std::logic_error("GpuJpegDecoder: every slot holds a batch submitted and not finished");
      jobs_.push_back(std::move(job));
      ++submitted_;
    }
    changed_.notify_all();
  }

  // The oldest submitted batch's slot, once it is decoded; the caller makes it into input, then calls
  // mark_finished(slot). A batch whose decode threw is taken here and its error thrown (the next call waits for
  // the next batch); after a fatal error this throws that error. Nothing submitted: std::logic_error.
  int wait_decoded() {
    std::unique_lock<std::mutex> lock(mutex_);
    if (finished_ == submitted_) throw std::logic_error("GpuJpegDecoder: finish_into without a submitted batch");
    const size_t slot = static_cast<size_t>(finished_ % states_.size());
    changed_.wait(lock, [&] { return (states_[slot] == State::kDecoded && numbers_[slot] == finished_) || fatal_; });
    if (fatal_) std::rethrow_exception(fatal_);
    if (errors_[slot]) {
      const std::exception_ptr error = errors_[slot];
      errors_[slot] = nullptr;
      states_[slot] = State::kFree;
      ++finished_;
      changed_.notify_all();
      std::rethrow_exception(error);
    }
    return static_cast<int>(slot);
  }

  // The caller has queued the work that reads `slot`'s batch (from wait_decoded).
  void mark_finished(int slot) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      states_[static_cast<size_t>(slot)] = State::kFinished;
      ++finished_;
    }
    changed_.notify_all();
  }

  // Batches taken by wait_decoded so far, failed ones included (a caller tells from it whether a throwing
  // wait_decoded took its batch).
  uint64_t finished_count() {
    std::lock_guard<std::mutex> lock(mutex_);
    return finished_;
  }

  bool holds_submitted() {
    std::lock_guard<std::mutex> lock(mutex_);
    return submitted_ != finished_;
  }

  // Retires every finished slot (waiting for the device), and any the decode thread is retiring: afterwards no
  // batch finished so far is held. Batches submitted and not finished stay.
  void drain() {
    std::unique_lock<std::mutex> lock(mutex_);
    for (;;) {
      changed_.wait(lock, [&] { return !any(State::kRetiring); });
      if (!any(State::kFinished)) return;
      retire_finished(lock, /*wait=*/true);
    }
  }

  // After an error: drops the batches not yet taken by the decode thread, waits for the batch it is decoding or
  // retiring, calls forget(slot, finished) for every slot still holding a batch (finished: the caller had made it
  // into input), and starts afresh (counts, errors, a fatal one included unless the thread could not start).
  void abandon(const std::function<void(int slot, bool finished)>& forget) {
    std::unique_lock<std::mutex> lock(mutex_);
    jobs_.clear();
    changed_.wait(lock, [&] { return !any(State::kDecoding) && !any(State::kRetiring); });
    for (size_t s = 0; s < states_.size(); ++s) {
      const bool holds = states_[s] == State::kFinished || (states_[s] == State::kDecoded && !errors_[s]);
      if (holds) forget(static_cast<int>(s), states_[s] == State::kFinished);  // a failed one was handed back
      states_[s] = State::kFree;
      errors_[s] = nullptr;
    }
    submitted_ = finished_ = taken_;
    fatal_ = start_failure_;  // a thread that could not start stays stopped
    changed_.notify_all();
  }

 private:
  enum class State {
    kFree,
    kDecoding,  // the decode thread writes it
    kDecoded,   // ready for wait_decoded (or failed)
    kFinished,  // made into input; the device may still read it; its batch is still held
    kRetiring,  // its batch is being handed back once the device is done
  };

  static size_t slot_count(int slots) {
    if (slots < 1) throw std::invalid_argument("DecodePipeline: no slots");
    return static_cast<size_t>(slots);
  }

  // A failed batch not yet taken by wait_decoded: no later one is decoded before it is (a strict-mode stop).
  bool failed_batch_waiting() const {
    return std::any_of(errors_.begin(), errors_.end(), [](const std::exception_ptr& e) { return e != nullptr; });
  }

  bool any(State state) const { return std::find(states_.begin(), states_.end(), state) != states_.end(); }

  // Hands back the batches of finished slots, oldest first: all of them (or only `only`), or with `wait` false
  // those the device is done with already. With `lock` held; lets it go while retiring (the slot is kRetiring
  // meanwhile). Each slot it takes ends kFree; a failed retire is thrown after that. Returns how many it retired.
  int retire_finished(std::unique_lock<std::mutex>& lock, bool wait, int only = -1) {
    std::vector<size_t> order;
    for (size_t s = 0; s < states_.size(); ++s)
      if (states_[s] == State::kFinished && (only < 0 || s == static_cast<size_t>(only))) order.push_back(s);
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return numbers_[a] < numbers_[b]; });
    int retired = 0;
    for (const size_t s : order) {
      if (states_[s] != State::kFinished) continue;  // the lock was let go: another caller took it
      if (!wait && !work_.device_done(static_cast<int>(s))) continue;
      states_[s] = State::kRetiring;
      lock.unlock();
      std::exception_ptr error;
      try {
        work_.retire(static_cast<int>(s));
      } catch (...) {
        error = std::current_exception();
      }
      lock.lock();
      states_[s] = State::kFree;
      ++retired;
      changed_.notify_all();
      if (error) std::rethrow_exception(error);
    }
    return retired;
  }

  // The decode thread. An error outside any batch's decode (the thread's start, a retire) is fatal: the thread
  // takes no more batches, and submit and wait_decoded throw it until abandon().
  void run() {
    std::unique_lock<std::mutex> lock(mutex_);
    if (work_.on_thread_start) {
      try {
        work_.on_thread_start();
      } catch (...) {
        fatal_ = start_failure_ = std::current_exception();
        changed_.notify_all();  // a wait_decoded may be waiting already
      }
    }
    for (;;) {
      changed_.wait(lock, [&] {
        if (stopping_) return true;
        if (jobs_.empty() || failed_batch_waiting() || fatal_) return false;
        const State state = states_[taken_ % states_.size()];
        return state == State::kFree || state == State::kFinished;
      });
      if (stopping_) return;
      const size_t slot = static_cast<size_t>(taken_ % states_.size());
      try {
        // Back early what the device is done with, so that the loader can refill it; then the slot's own batch.
        // The lock was let go in between: everything is checked again.
        if (retire_finished(lock, /*wait=*/false) > 0) continue;
        if (states_[slot] == State::kFinished) {
          retire_finished(lock, /*wait=*/true, static_cast<int>(slot));
          continue;
        }
      } catch (...) {
        fatal_ = std::current_exception();
        changed_.notify_all();
        continue;
      }
      // Taken and marked kDecoding in one hold of the lock: abandon() waits for the decode, not forgets it halfway.
      const uint64_t number = taken_++;
      const Job job = std::move(jobs_.front());
      jobs_.pop_front();
      states_[slot] = State::kDecoding;
      lock.unlock();
      std::exception_ptr error;
      try {
        work_.decode(job, static_cast<int>(slot), number);
      } catch (...) {
        error = std::current_exception();
        try {
          if (work_.hand_back) work_.hand_back(job);
        } catch (...) {  // the decode's error is the one to report
        }
      }
      lock.lock();
      numbers_[slot] = number;
      errors_[slot] = error;  // if set, the next batch waits until this one is taken
      states_[slot] = State::kDecoded;
      changed_.notify_all();
    }
  }

  Work work_;
  std::mutex mutex_;
  std::condition_variable changed_;  // a job, a slot's state, stopping_
  std::vector<State> states_;
  std::vector<uint64_t> numbers_ = std::vector<uint64_t>(states_.size(), 0);  // the batch each slot holds
  std::vector<std::exception_ptr> errors_ = std::vector<std::exception_ptr>(states_.size());  // kDecoded: failed
  std::deque<Job> jobs_;  // submitted, not yet taken
  uint64_t submitted_ = 0, taken_ = 0, finished_ = 0;
  std::exception_ptr fatal_;
  std::exception_ptr start_failure_;  // on_thread_start's: fatal for good
  bool stopping_ = false;
  std::thread thread_;  // last: started once everything above is
};

}  // namespace rn50::input
