// ops/weight_cast_kernels.h: one launch that converts many tensors between float32 and float16 or bfloat16 (the
// fused bottlenecks' weight copies forward, their gradients backward), from a list of raw pointers passed by value;
// no ATen.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

namespace rn50::ops::kernels {

enum class CastType { kFloat, kHalf, kBFloat16 };

inline constexpr int kCastListMax = 64;      // tensors one launch converts: the list stays under 4 KB of parameters
inline constexpr int64_t kCastChunk = 8192;  // elements one block converts: 256 threads, 4 vectors of 8 each

// Where each block of one launch works: tensor i's `numel` elements go from src[i] to dst[i], in chunks of
// kCastChunk; its chunks are the blocks first_chunk[i] .. first_chunk[i + 1] - 1. vec is 8 when every pointer is
// 16-byte aligned (vectors of 8 elements, the tail of a tensor element by element), 1 otherwise.
struct CastList {
  const void* src[kCastListMax];
  void* dst[kCastListMax];
  int64_t numel[kCastListMax];
  int64_t first_chunk[kCastListMax + 1];
  int count = 0;
  int vec = 1;
};

struct CastItem {
  const void* src;
  void* dst;
  int64_t numel;  // elements, at least 1
};

// The launches for `items`, in order, at most kCastListMax tensors each; empty for no items. A list's vectors are
// 8 wide only if all its pointers allow 16-byte accesses.
inline std::vector<CastList> make_cast_lists(const std::vector<CastItem>& items) {
  std::vector<CastList> lists;
  for (const CastItem& item : items) {
    if (lists.empty() || lists.back().count == kCastListMax) {
      lists.emplace_back();
      lists.back().first_chunk[0] = 0;
      lists.back().vec = 8;
    }
    CastList& l = lists.back();
    const int i = l.count++;
    l.src[i] = item.src;
    l.dst[i] = item.dst;
    l.numel[i] = item.numel;
    l.first_chunk[i + 1] = l.first_chunk[i] + (item.numel + kCastChunk - 1) / kCastChunk;
    if (reinterpret_cast<uintptr_t>(item.src) % 16 != 0 || reinterpret_cast<uintptr_t>(item.dst) % 16 != 0) l.vec = 1;
  }
  return lists;
}

// Converts every tensor of `list` from `from` to `to` (float32 to float16 or bfloat16, or back), rounding to the
// nearest even as ATen's casts do, on `stream`. Any other pair of types is refused.
void cast_many(const CastList& list, CastType from, CastType to, cudaStream_t stream);

}  // namespace rn50::ops::kernels
