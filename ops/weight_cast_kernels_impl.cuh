// ops/weight_cast_kernels_impl.cuh: what one thread of the multi-tensor cast does, as a function of its block and
// thread index, so that the kernel (ops/weight_cast_kernels.cu) and a host emulation of it
// (tests/ops/test_weight_cast_kernels_host.cpp) run the same code.
#pragma once

#include <cstdint>

// The BatchNorm kernels' vector access (load, store) and the RN50_HD / RN50_UNROLL macros.
#include "ops/batch_norm_kernels_impl.cuh"
#include "ops/weight_cast_kernels.h"

namespace rn50::ops::kernels::cast_impl {

inline constexpr int kThreads = 256;
inline constexpr int kVector = 8;                                            // elements of one vector access
inline constexpr int kVectorsPerThread = kCastChunk / (kThreads * kVector);  // 4
static_assert(kVectorsPerThread * kThreads * kVector == kCastChunk, "a chunk is whole vectors of every thread");

// The tensor whose chunks include `block`: the last i with first_chunk[i] <= block.
RN50_HD inline int tensor_of(const CastList& l, int64_t block) {
  int lo = 0, hi = l.count - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (l.first_chunk[mid] <= block) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  return lo;
}

// Eight elements as float, from float32 (two 16-byte loads) or a 16-bit type (one).
template <typename T>
RN50_HD inline void load8(const T* __restrict__ p, float (&f)[8]) {
  impl::load<T, 8>(p, f);
}
template <>
RN50_HD inline void load8<float>(const float* __restrict__ p, float (&f)[8]) {
  float lo[4], hi[4];
  impl::load<float, 4>(p, lo);
  impl::load<float, 4>(p + 4, hi);
  for (int j = 0; j < 4; ++j) {
    f[j] = lo[j];
    f[4 + j] = hi[j];
  }
}

template <typename T>
RN50_HD inline void store8(T* __restrict__ p, const float (&f)[8]) {
  impl::store<T, 8>(p, f);
}
template <>
RN50_HD inline void store8<float>(float* __restrict__ p, const float (&f)[8]) {
  const float lo[4] = {f[0], f[1], f[2], f[3]}, hi[4] = {f[4], f[5], f[6], f[7]};
  impl::store<float, 4>(p, lo);
  impl::store<float, 4>(p + 4, hi);
}

// Thread `thread` of block `block`: its vectors of the block's chunk, consecutive threads on consecutive vectors.
// Every value passes through float, which is exact both ways (float16 and bfloat16 are subsets of float32) and
// rounds to nearest even once, on the way down, as ATen's casts do.
template <typename From, typename To, int VEC>
RN50_HD inline void cast_thread(const CastList& l, int64_t block, int thread) {
  const int i = tensor_of(l, block);
  const From* __restrict__ src = static_cast<const From*>(l.src[i]);
  To* __restrict__ dst = static_cast<To*>(l.dst[i]);
  const int64_t n = l.numel[i];
  const int64_t base = (block - l.first_chunk[i]) * kCastChunk;
  RN50_UNROLL
  for (int k = 0; k < kVectorsPerThread; ++k) {
    const int64_t e = base + (static_cast<int64_t>(k) * kThreads + thread) * kVector;
    if (e >= n) break;  // e grows with k: the rest lie past the end too
    if (VEC == kVector && e + kVector <= n) {
      float f[8];
      load8<From>(src + e, f);
      store8<To>(dst + e, f);
    } else {
      for (int64_t j = e; j < e + kVector && j < n; ++j) {
        float f[1];
        impl::load<From, 1>(src + j, f);
        impl::store<To, 1>(dst + j, f);
      }
    }
  }
}

}  // namespace rn50::ops::kernels::cast_impl
