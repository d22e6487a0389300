// tests/input/gpu_decode/test_deferred_reuse_memory.cpp: DeferredReuseMemory hands a freed block out again only after
// the batch that freed it has completed, never a block it did not hand out, and returns everything when it goes.
#include <gtest/gtest.h>

#include <cstdlib>
#include <set>

#include "input/gpu_decode/deferred_reuse_memory.h"

namespace rn50::input {
namespace {

// Raw memory from malloc, with the live blocks tracked.
struct FakeRaw {
  std::set<void*> live;
  int allocations = 0;
  bool fail = false;
  DeferredReuseMemory::RawAlloc alloc() {
    return [this](size_t size) -> void* {
      if (fail) return nullptr;
      void* p = std::malloc(size);
      live.insert(p);
      ++allocations;
      return p;
    };
  }
  DeferredReuseMemory::RawFree free() {
    return [this](void* p) {
      EXPECT_EQ(live.erase(p), 1u) << "freed twice, or never allocated";
      std::free(p);
    };
  }
};

TEST(DeferredReuseMemory, ReusesAFreedBlockOnlyAfterItsBatchCompleted) {
  FakeRaw raw;
  DeferredReuseMemory memory(raw.alloc(), raw.free());
  memory.set_batch(5);
  void* first = nullptr;
  ASSERT_EQ(memory.allocate(&first, 1000), 0);
  ASSERT_EQ(memory.release(first), 0);  // freed while batch 5 may still use it

  void* second = nullptr;
  ASSERT_EQ(memory.allocate(&second, 1000), 0);
  EXPECT_NE(second, first) << "handed out before batch 5 completed";
  memory.completed(4);
  void* third = nullptr;
  ASSERT_EQ(memory.allocate(&third, 1000), 0);
  EXPECT_NE(third, first) << "batch 4 completing says nothing of batch 5";

  memory.completed(5);
  void* fourth = nullptr;
  ASSERT_EQ(memory.allocate(&fourth, 900), 0);
  EXPECT_EQ(fourth, first) << "a completed batch's block, large enough, is reused";
  EXPECT_EQ(raw.allocations, 3);
  EXPECT_EQ(memory.raw_allocations(), 3u);
}

TEST(DeferredReuseMemory, NeitherReusesATooSmallNorAFarLargerBlock) {
  FakeRaw raw;
  DeferredReuseMemory memory(raw.alloc(), raw.free());
  void *small = nullptr, *large = nullptr;
  ASSERT_EQ(memory.allocate(&small, 100), 0);
  ASSERT_EQ(memory.allocate(&large, size_t{64} << 20), 0);
  memory.release(small);
  memory.release(large);
  memory.completed(0);
  void* p = nullptr;
  ASSERT_EQ(memory.allocate(&p, 4096), 0);
  EXPECT_NE(p, small);
  EXPECT_NE(p, large);  // 64 MiB for 4 KiB would waste the block
  EXPECT_EQ(raw.allocations, 3);
}

TEST(DeferredReuseMemory, RefusesForeignPointersAndReportsFailedAllocations) {
  FakeRaw raw;
  DeferredReuseMemory memory(raw.alloc(), raw.free());
  int not_ours = 0;
  EXPECT_EQ(memory.release(&not_ours), 1);
  EXPECT_EQ(memory.release(nullptr), 0);
  raw.fail = true;
  void* p = &not_ours;
  EXPECT_EQ(memory.allocate(&p, 16), 1);
}

TEST(DeferredReuseMemory, ReturnsEveryBlockWhenItGoes) {
  FakeRaw raw;
  {
    DeferredReuseMemory memory(raw.alloc(), raw.free());
    void *a = nullptr, *b = nullptr, *c = nullptr;
    memory.allocate(&a, 10);
    memory.allocate(&b, 20);
    memory.allocate(&c, 30);
    memory.release(a);  // pending
    memory.release(b);
    memory.completed(0);  // free
    EXPECT_EQ(memory.owned_bytes(), 60u);
  }
  EXPECT_TRUE(raw.live.empty());
}

}  // namespace
}  // namespace rn50::input
