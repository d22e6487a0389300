// input/gpu_decode/deferred_reuse_memory.h: DeferredReuseMemory, a pool whose freed blocks are handed out again only
// once the batch during which they were freed has finished on the device. No CUDA here: the raw allocation is passed
// in.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <vector>

namespace rn50::input {

// For nvJPEG's own buffers. Its defaults, cudaFree and cudaFreeHost, wait for the whole device, a queued training
// step included, whenever nvJPEG resizes a buffer. Reuse is gated on completion as the host sees it (the decoder's
// retire()), not stream-ordered (cudaFreeAsync), because nvJPEG's hardware path writes outside the order of the
// stream it is given. Blocks go back through raw_free only when the pool goes, after the device is idle.
class DeferredReuseMemory {
 public:
  using RawAlloc = std::function<void*(size_t)>;  // nullptr on failure
  using RawFree = std::function<void(void*)>;

  DeferredReuseMemory(RawAlloc raw_alloc, RawFree raw_free)
      : raw_alloc_(std::move(raw_alloc)), raw_free_(std::move(raw_free)) {}
  DeferredReuseMemory(const DeferredReuseMemory&) = delete;
  DeferredReuseMemory& operator=(const DeferredReuseMemory&) = delete;
  ~DeferredReuseMemory() {
    for (const auto& block : owned_) raw_free_(block.first);
  }

  // nvJPEG's allocator convention: 0 on success. A free block is reused when it is large enough and not far larger.
  int allocate(void** ptr, size_t size) {
    std::lock_guard<std::mutex> lock(mutex_);
    const auto reusable = free_.lower_bound(size);
    if (reusable != free_.end() && reusable->first <= 2 * size + kSlack) {
      *ptr = reusable->second;
      free_.erase(reusable);
      return 0;
    }
    void* fresh = raw_alloc_(size);
    if (fresh == nullptr) return 1;
    ++raw_allocations_;
    owned_.emplace(fresh, size);
    *ptr = fresh;
    return 0;
  }

  // 0 on success; 1 for a pointer this pool did not hand out.
  int release(void* ptr) {
    if (ptr == nullptr) return 0;
    std::lock_guard<std::mutex> lock(mutex_);
    const auto block = owned_.find(ptr);
    if (block == owned_.end()) return 1;
    pending_.push_back({ptr, block->second, batch_});
    return 0;
  }

  // Frees from now on belong to batch `batch` (batches are numbered in the order they run).
  void set_batch(uint64_t batch) {
    std::lock_guard<std::mutex> lock(mutex_);
    batch_ = batch;
  }

  // Every batch up to `batch` has finished on the device: what they freed may be handed out again.
  void completed(uint64_t batch) {
    std::lock_guard<std::mutex> lock(mutex_);
    const auto done =
        std::stable_partition(pending_.begin(), pending_.end(), [&](const Pending& p) { return p.batch > batch; });
    for (auto it = done; it != pending_.end(); ++it) free_.emplace(it->size, it->ptr);
    pending_.erase(done, pending_.end());
  }

  // Blocks taken from raw_alloc so far.
  uint64_t raw_allocations() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return raw_allocations_;
  }

  size_t owned_bytes() const {
    std::lock_guard<std::mutex> lock(mutex_);
    size_t total = 0;
    for (const auto& block : owned_) total += block.second;
    return total;
  }

 private:
  static constexpr size_t kSlack = size_t{1} << 20;
  struct Pending {
    void* ptr;
    size_t size;
    uint64_t batch;
  };
  RawAlloc raw_alloc_;
  RawFree raw_free_;
  mutable std::mutex mutex_;  // nvJPEG may allocate from threads of its own
  std::map<void*, size_t> owned_;
  std::multimap<size_t, void*> free_;  // by size
  std::vector<Pending> pending_;
  uint64_t batch_ = 0;
  uint64_t raw_allocations_ = 0;
};

}  // namespace rn50::input
