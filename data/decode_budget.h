// data/decode_budget.h: a budget of decoded-image bytes shared by the decode threads, so that no set of valid images
// decoded at once holds more memory than the process may use (sixteen 13000x13000 images, 0.5 GB each in libjpeg,
// were killed in a 4 GiB container).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <mutex>

namespace rn50::data {

class DecodeBudget {
 public:
  explicit DecodeBudget(uint64_t bytes);
  DecodeBudget(const DecodeBudget&) = delete;
  DecodeBudget& operator=(const DecodeBudget&) = delete;

  // Bytes held for one decode, given back when it goes out of scope.
  class Hold {
   public:
    Hold() = default;
    Hold(Hold&& other) noexcept;
    Hold& operator=(Hold&& other) noexcept;
    ~Hold();
    Hold(const Hold&) = delete;
    Hold& operator=(const Hold&) = delete;

   private:
    friend class DecodeBudget;
    Hold(DecodeBudget* budget, uint64_t bytes) : budget_(budget), bytes_(bytes) {}
    DecodeBudget* budget_ = nullptr;
    uint64_t bytes_ = 0;
  };

  // Waits until `bytes` fit beside the bytes in flight, in the order the calls came (a large image is not passed
  // over forever by small ones). With nothing in flight any size goes ahead alone: an image larger than the whole
  // budget still decodes, and no caller waits for memory that will never be given back. A caller must not wait
  // while it holds bytes of its own.
  Hold acquire(uint64_t bytes);

  uint64_t capacity() const { return capacity_; }
  uint64_t in_flight() const;
  // Calls waiting in acquire() now (tests wait on it rather than on sleeps).
  uint64_t waiting() const;
  // The most ever held at once: at most capacity(), unless one image larger than that went ahead alone.
  uint64_t peak_in_flight() const;

 private:
  void release(uint64_t bytes);

  const uint64_t capacity_;
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  uint64_t in_flight_ = 0, peak_ = 0;
  uint64_t next_ticket_ = 0, serving_ = 0;  // the order of the waiting calls
};

// What the automatic budget is a share of: this process's cgroup memory limit (core/limits.h) where it has one, else
// the machine's memory.
struct ProcessMemory {
  uint64_t bytes = 0;  // 0: neither could be read
  bool cgroup = false;
};
ProcessMemory process_memory();

// A process's budget: `configured_bytes` where it is set (decode_memory_mb), else a quarter of `memory_bytes` (room
// for the model, the batches and the rest beside the images being decoded; 0, unknown, is taken as 16 GiB) shared
// evenly by the `local_processes` on this host that have that memory (the ranks of a launch in one container, each
// with a budget of its own). Below 1, `local_processes` counts as 1.
uint64_t decode_budget_bytes(uint64_t configured_bytes, uint64_t memory_bytes, int local_processes);

}  // namespace rn50::data
