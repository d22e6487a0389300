// core/host_memory.cpp: the pageable host allocator.
#include "core/host_memory.h"

#include <algorithm>
#include <new>

namespace rn50 {
namespace {

// Page alignment: suits SIMD loads and lets a later cudaHostRegister pin whole pages.
constexpr size_t kHostAlignment = 4096;

class PageableAllocator final : public HostAllocator {
 public:
  void* allocate(size_t bytes) override {
    return ::operator new(std::max<size_t>(bytes, 1), std::align_val_t(kHostAlignment));
  }
  void deallocate(void* ptr) noexcept override {
    if (ptr != nullptr) ::operator delete(ptr, std::align_val_t(kHostAlignment));
  }
  bool pinned() const override { return false; }
};

}  // namespace

std::unique_ptr<HostAllocator> make_pageable_allocator() { return std::make_unique<PageableAllocator>(); }

}  // namespace rn50
