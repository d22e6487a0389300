// core/host_memory.h: HostAllocator, where batch buffers live on the host: pageable here, pinned in cuda/.
#pragma once

#include <cstddef>
#include <memory>

namespace rn50 {

// The loader's pools allocate through this, so that the CUDA build can hand them page-locked memory
// (cudaHostAlloc) without the loader knowing CUDA.
class HostAllocator {
 public:
  virtual ~HostAllocator() = default;
  virtual void* allocate(size_t bytes) = 0;
  virtual void deallocate(void* ptr) noexcept = 0;
  virtual bool pinned() const = 0;
};

// Page-aligned pageable memory.
std::unique_ptr<HostAllocator> make_pageable_allocator();

}  // namespace rn50
