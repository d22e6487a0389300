// ops/batch_norm_kernels_impl.cuh: the arithmetic and index mapping of rn50's BatchNorm kernels as functions of one
// thread's and block's indices, so that the kernels (ops/batch_norm_kernels.cu) and a host emulation of them
// (tests/ops/test_batch_norm_kernels_host.cpp) run the same code.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <vector_functions.h>
#include <vector_types.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "ops/batch_norm_kernels.h"

#if defined(__CUDACC__)
#define RN50_HD __host__ __device__
#else
#define RN50_HD
#endif
// Unrolled in device code; the host compilers (nvcc's host pass, the emulation test) take the loops as written.
#if defined(__CUDA_ARCH__)
#define RN50_UNROLL _Pragma("unroll")
#else
#define RN50_UNROLL
#endif

namespace rn50::ops::kernels::impl {

constexpr int kThreads = 256;    // threads of a main kernel's block, at most
constexpr int kBlocksPerSm = 4;  // resident blocks per SM the grids aim for (one wave; loops stride over rows)
// The dx pass that gathers a max-pool's gradient (batch_norm_backward_pooled) holds up to four positions and gradients
// a row: at kBlocksPerSm (64 registers) ptxas spilled 208 bytes a thread on sm_90, at 2 blocks it takes 110 and
// spills nothing (CUDA 13, 2026-12-06).
constexpr int kGatherBlocksPerSm = 2;
constexpr int kMaxLanes = 32;    // channel vectors across one block: 512 contiguous bytes of a row
// Rows a thread loads before it uses any: enough bytes in flight per SM to cover memory latency, few enough registers
// for kBlocksPerSm blocks (the suffix counts the tensors a row reads).
constexpr int kStatsUnroll = 4;
constexpr int kElementwiseUnroll1 = 4;
constexpr int kElementwiseUnroll2 = 2;
constexpr int kElementwiseUnroll3 = 1;
constexpr int kBackwardUnroll = 2;
constexpr int kFinalizeChannels = 32;  // the finalize kernels' block: 32 channels x 16 groups of partials
constexpr int kFinalizeGroups = 16;

struct Idx {
  int tx, ty, bx, by;
};

inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

inline Plan make_plan_for(int64_t rows, int64_t channels, int elem_bytes, bool aligned16, int sm_count) {
  Plan p;
  p.rows = rows;
  p.channels = channels;
  const int wide = 16 / elem_bytes;
  p.vec = (aligned16 && channels % wide == 0) ? wide : 1;
  const int64_t vectors = channels / p.vec;
  p.tiles = static_cast<int>(ceil_div(vectors, kMaxLanes));
  p.lanes = static_cast<int>(ceil_div(vectors, p.tiles));  // balanced: the last tile is as full as the others
  p.row_threads = kThreads / p.lanes;
  const int64_t row_groups = ceil_div(ceil_div(rows, p.row_threads), kStatsUnroll);
  const int64_t wave = std::max<int64_t>(1, static_cast<int64_t>(sm_count) * kBlocksPerSm / p.tiles);
  const int64_t blocks = std::min<int64_t>({row_groups, wave, 65535});
  p.reduce_blocks = static_cast<int>(std::max<int64_t>(1, blocks));
  p.elementwise_blocks = p.reduce_blocks;
  p.workspace_bytes = 2 * static_cast<size_t>(p.reduce_blocks) * static_cast<size_t>(channels) * sizeof(float);
  return p;
}

// The plan of batch_norm_backward_pooled's dx pass: `in` with the grid of kGatherBlocksPerSm blocks an SM (one wave).
inline Plan pooled_dx_plan(const Plan& in) {
  Plan p = in;
  p.elementwise_blocks = static_cast<int>(
      std::max<int64_t>(1, ceil_div(static_cast<int64_t>(in.elementwise_blocks) * kGatherBlocksPerSm, kBlocksPerSm)));
  return p;
}

// The plan of batch_norm_backward_pooled's reduction over a max-pool's outputs (`rows_out` of them) for a BatchNorm
// planned as `in` on the pool's input: the same channels and tiling, at most `in`'s blocks, so that its partials fit
// `in`'s workspace.
inline Plan pooled_reduce_plan(const Plan& in, int64_t rows_out) {
  Plan p = in;
  p.rows = rows_out;
  const int64_t row_groups = ceil_div(ceil_div(rows_out, p.row_threads), kStatsUnroll);
  p.reduce_blocks = static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(row_groups, in.reduce_blocks)));
  p.elementwise_blocks = p.reduce_blocks;
  p.workspace_bytes = 2 * static_cast<size_t>(p.reduce_blocks) * static_cast<size_t>(p.channels) * sizeof(float);
  return p;
}

// ---- element conversion and vector access -----------------------------------------------------------------------

RN50_HD inline float to_float(float v) { return v; }
RN50_HD inline float to_float(__half v) { return __half2float(v); }
RN50_HD inline float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }

// N elements of T as one aligned access (16 bytes, or one element): raw bits, converted to float only where used, so
// that the rows a thread keeps in flight cost 4 registers each.
template <typename T, int N>
struct Pack;
template <>
struct Pack<float, 4> {
  float4 r;
};
template <>
struct Pack<float, 1> {
  float r;
};
template <>
struct Pack<__half, 8> {
  uint4 r;
};
template <>
struct Pack<__half, 1> {
  unsigned short r;
};
template <>
struct Pack<__nv_bfloat16, 8> {
  uint4 r;
};
template <>
struct Pack<__nv_bfloat16, 1> {
  unsigned short r;
};

template <typename T, int N>
RN50_HD inline Pack<T, N> load_pack(const T* __restrict__ p) {
  Pack<T, N> pack;
  pack.r = *reinterpret_cast<const decltype(pack.r)*>(p);
  return pack;
}

template <typename T, int N>
RN50_HD inline void store_pack(T* __restrict__ p, const Pack<T, N>& pack) {
  *reinterpret_cast<decltype(pack.r)*>(p) = pack.r;
}

template <typename To, typename From>
RN50_HD inline To bit_cast(const From& from) {
  static_assert(sizeof(To) == sizeof(From), "bit_cast between types of different sizes");
  To to;
  memcpy(static_cast<void*>(&to), &from, sizeof(To));  // void*: __half2 and the like have user copy operators
  return to;
}

RN50_HD inline void unpack(const Pack<float, 4>& p, float (&f)[4]) {
  f[0] = p.r.x;
  f[1] = p.r.y;
  f[2] = p.r.z;
  f[3] = p.r.w;
}
RN50_HD inline void unpack(const Pack<float, 1>& p, float (&f)[1]) { f[0] = p.r; }

RN50_HD inline void unpack_half2(unsigned int word, float* f) {
  f[0] = __half2float(__ushort_as_half(static_cast<unsigned short>(word & 0xffffu)));
  f[1] = __half2float(__ushort_as_half(static_cast<unsigned short>(word >> 16)));
}
RN50_HD inline void unpack(const Pack<__half, 8>& p, float (&f)[8]) {
  unpack_half2(p.r.x, f);
  unpack_half2(p.r.y, f + 2);
  unpack_half2(p.r.z, f + 4);
  unpack_half2(p.r.w, f + 6);
}
RN50_HD inline void unpack(const Pack<__half, 1>& p, float (&f)[1]) { f[0] = __half2float(__ushort_as_half(p.r)); }

// bfloat16 is the upper half of a float's bits: converting is a shift or a mask.
RN50_HD inline void unpack_bf162(unsigned int word, float* f) {
  f[0] = bit_cast<float>(word << 16);
  f[1] = bit_cast<float>(word & 0xffff0000u);
}
RN50_HD inline void unpack(const Pack<__nv_bfloat16, 8>& p, float (&f)[8]) {
  unpack_bf162(p.r.x, f);
  unpack_bf162(p.r.y, f + 2);
  unpack_bf162(p.r.z, f + 4);
  unpack_bf162(p.r.w, f + 6);
}
RN50_HD inline void unpack(const Pack<__nv_bfloat16, 1>& p, float (&f)[1]) {
  f[0] = bit_cast<float>(static_cast<unsigned int>(p.r) << 16);
}

RN50_HD inline Pack<float, 4> pack_of(const float (&f)[4], float) { return {make_float4(f[0], f[1], f[2], f[3])}; }
RN50_HD inline Pack<float, 1> pack_of(const float (&f)[1], float) { return {f[0]}; }
RN50_HD inline Pack<__half, 8> pack_of(const float (&f)[8], __half) {
  return {make_uint4(
      bit_cast<unsigned int>(__floats2half2_rn(f[0], f[1])), bit_cast<unsigned int>(__floats2half2_rn(f[2], f[3])),
      bit_cast<unsigned int>(__floats2half2_rn(f[4], f[5])), bit_cast<unsigned int>(__floats2half2_rn(f[6], f[7])))};
}
RN50_HD inline Pack<__half, 1> pack_of(const float (&f)[1], __half) {
  return {__half_as_ushort(__float2half_rn(f[0]))};
}
RN50_HD inline Pack<__nv_bfloat16, 8> pack_of(const float (&f)[8], __nv_bfloat16) {
  return {make_uint4(bit_cast<unsigned int>(__floats2bfloat162_rn(f[0], f[1])),
                     bit_cast<unsigned int>(__floats2bfloat162_rn(f[2], f[3])),
                     bit_cast<unsigned int>(__floats2bfloat162_rn(f[4], f[5])),
                     bit_cast<unsigned int>(__floats2bfloat162_rn(f[6], f[7])))};
}
RN50_HD inline Pack<__nv_bfloat16, 1> pack_of(const float (&f)[1], __nv_bfloat16) {
  return {__bfloat16_as_ushort(__float2bfloat16_rn(f[0]))};
}

template <typename T, int N>
RN50_HD inline void load(const T* __restrict__ p, float (&out)[N]) {
  unpack(load_pack<T, N>(p), out);
}

template <typename T, int N>
RN50_HD inline void store(T* __restrict__ p, const float (&in)[N]) {
  store_pack<T, N>(p, pack_of(in, T{}));
}

// The channel vector a thread covers (its first channel is vector * VEC), and whether it holds one at all (the
// last tile can be narrower than `lanes`).
RN50_HD inline int64_t vector_of(const Plan& p, const Idx& i) { return static_cast<int64_t>(i.bx) * p.lanes + i.tx; }

// ---- forward: statistics ------------------------------------------------------------------------------------------

// Each thread sums (x - shift) and (x - shift)^2 over its rows in float, shift being the channel's value in row 0:
// the sums then hold values near zero mean, so the sum of squares loses nothing to cancellation when the channel's
// mean is large against its spread (the finalize pass adds the shift back). Loads stay packed until used, so that
// kStatsUnroll rows of 16 bytes are in flight per thread at 4 registers each. Results go to shared memory, laid out
// [row_threads][lanes * VEC].
template <typename T, int VEC>
RN50_HD inline void stats_accumulate(const Plan& p, const Idx& i, const T* __restrict__ x, float* s_sum, float* s_sq) {
  const int64_t v = vector_of(p, i);
  float s1[VEC], s2[VEC];
  RN50_UNROLL
  for (int k = 0; k < VEC; ++k) s1[k] = s2[k] = 0.0f;
  if (v * VEC < p.channels) {
    const int64_t c0 = v * VEC;
    float shift[VEC];
    load<T, VEC>(x + c0, shift);
    const int64_t step = static_cast<int64_t>(p.reduce_blocks) * p.row_threads;
    for (int64_t r = static_cast<int64_t>(i.by) * p.row_threads + i.ty; r < p.rows; r += kStatsUnroll * step) {
      Pack<T, VEC> e[kStatsUnroll]{};
      RN50_UNROLL
      for (int u = 0; u < kStatsUnroll; ++u) {
        const int64_t row = r + u * step;
        if (row < p.rows) e[u] = load_pack<T, VEC>(x + row * p.channels + c0);
      }
      RN50_UNROLL
      for (int u = 0; u < kStatsUnroll; ++u) {
        if (r + u * step >= p.rows) continue;
        float f[VEC];
        unpack(e[u], f);
        RN50_UNROLL
        for (int k = 0; k < VEC; ++k) {
          const float d = f[k] - shift[k];
          s1[k] += d;
          s2[k] = fmaf(d, d, s2[k]);
        }
      }
    }
  }
  const int base = i.ty * p.lanes * VEC + i.tx * VEC;
  RN50_UNROLL
  for (int k = 0; k < VEC; ++k) {
    s_sum[base + k] = s1[k];
    s_sq[base + k] = s2[k];
  }
}

// After the block's barrier: one thread per channel of the tile adds the row threads' sums and writes the block's
// partial, [reduce_blocks][channels].
RN50_HD inline void block_partials(const Plan& p, int vec, int tid, int bx, int by, const float* s_a, const float* s_b,
                                   float* __restrict__ part_a, float* __restrict__ part_b) {
  const int width = p.lanes * vec;
  for (int lc = tid; lc < width; lc += p.lanes * p.row_threads) {
    const int64_t c = static_cast<int64_t>(bx) * width + lc;
    if (c >= p.channels) continue;
    float a = 0.0f, b = 0.0f;
    for (int t = 0; t < p.row_threads; ++t) {
      a += s_a[t * width + lc];
      b += s_b[t * width + lc];
    }
    part_a[static_cast<int64_t>(by) * p.channels + c] = a;
    part_b[static_cast<int64_t>(by) * p.channels + c] = b;
  }
}

// The finalize kernels' first phase: thread (tx, ty) of block bx adds, in double, the partials of channel
// bx * 32 + tx from every 16th block starting at ty; results to shared memory [16][32].
RN50_HD inline void finalize_accumulate(const Plan& p, int tx, int ty, int bx, const float* __restrict__ part_a,
                                        const float* __restrict__ part_b, double* s_a, double* s_b) {
  const int64_t c = static_cast<int64_t>(bx) * kFinalizeChannels + tx;
  double a = 0.0, b = 0.0;
  if (c < p.channels) {
    for (int g = ty; g < p.reduce_blocks; g += kFinalizeGroups) {
      a += part_a[static_cast<int64_t>(g) * p.channels + c];
      b += part_b[static_cast<int64_t>(g) * p.channels + c];
    }
  }
  s_a[ty * kFinalizeChannels + tx] = a;
  s_b[ty * kFinalizeChannels + tx] = b;
}

RN50_HD inline void finalize_sum(int tx, const double* s_a, const double* s_b, double& a, double& b) {
  a = 0.0;
  b = 0.0;
  for (int t = 0; t < kFinalizeGroups; ++t) {
    a += s_a[t * kFinalizeChannels + tx];
    b += s_b[t * kFinalizeChannels + tx];
  }
}

struct StatsOut {
  float* mean;
  float* invstd;
  float* running_mean;  // may be null
  float* running_var;   // may be null
  double momentum;
  double eps;
};

// The finalize kernels' second phase (threads of ty == 0): mean, biased variance and invstd of channel c from the
// shifted sums, and the running statistics' update with the unbiased variance, as PyTorch does.
template <typename T>
RN50_HD inline void finalize_forward(const Plan& p, int tx, int bx, const double* s_a, const double* s_b,
                                     const T* __restrict__ x, const StatsOut& out) {
  const int64_t c = static_cast<int64_t>(bx) * kFinalizeChannels + tx;
  if (c >= p.channels) return;
  double a, b;
  finalize_sum(tx, s_a, s_b, a, b);
  const double m = static_cast<double>(p.rows);
  const double shifted_mean = a / m;
  const double spread = b / m - shifted_mean * shifted_mean;
  const double var = spread > 0.0 ? spread : 0.0;  // rounding can leave a constant channel's slightly negative
  const double mean = static_cast<double>(to_float(x[c])) + shifted_mean;
  out.mean[c] = static_cast<float>(mean);
  out.invstd[c] = static_cast<float>(1.0 / sqrt(var + out.eps));
  if (out.running_mean != nullptr) {
    out.running_mean[c] = static_cast<float>((1.0 - out.momentum) * out.running_mean[c] + out.momentum * mean);
  }
  if (out.running_var != nullptr) {
    const double unbiased = p.rows > 1 ? var * m / (m - 1.0) : var;
    out.running_var[c] = static_cast<float>((1.0 - out.momentum) * out.running_var[c] + out.momentum * unbiased);
  }
}

// ---- forward: normalise, add, ReLU or SiLU -------------------------------------------------------------------------

// Byte (row * channels + c0) / 8 of a relu_bits mask, bit k for channel c0 + k (channels a multiple of 8).
RN50_HD inline int64_t relu_bits_index(int64_t row, int64_t channels, int64_t c0) { return (row * channels + c0) / 8; }

// That byte for a pack of 8 outputs as stored: bit k set where element k is positive (a mask read from y would say the
// same, NaN and values rounded to zero included).
template <typename T>
RN50_HD inline uint8_t relu_bits_of(const Pack<T, 8>& stored) {
  float f[8];
  unpack(stored, f);
  unsigned bits = 0;
  RN50_UNROLL
  for (int k = 0; k < 8; ++k) bits |= (f[k] > 0.0f ? 1U : 0U) << k;
  return static_cast<uint8_t>(bits);
}

// SiLU and its derivative: z * sigmoid(z), and sigmoid(z) * (1 + z * (1 - sigmoid(z))).
RN50_HD inline float silu_of(float z) { return z / (1.0f + expf(-z)); }
RN50_HD inline float silu_grad(float z) {
  const float s = 1.0f / (1.0f + expf(-z));
  return s * (1.0f + z * (1.0f - s));
}

// Rows run from the last to the first: the statistics pass read them first to last, so the tensor's tail is what the
// L2 cache still holds when this pass starts. With a residual, ReLU and 8-element packs, relu_bits (where not null)
// receives the mask as bits (ForwardArgs::relu_bits).
template <typename T, int VEC, bool kResidual, bool kRelu, bool kSilu = false>
RN50_HD inline void normalize_rows(const Plan& p, const Idx& i, const T* __restrict__ x, const T* __restrict__ residual,
                                   T* __restrict__ y, const float* __restrict__ weight, const float* __restrict__ bias,
                                   const float* __restrict__ mean, const float* __restrict__ invstd,
                                   uint8_t* __restrict__ relu_bits = nullptr) {
  constexpr int U = kResidual ? kElementwiseUnroll2 : kElementwiseUnroll1;
  const int64_t v = vector_of(p, i);
  if (v * VEC >= p.channels) return;
  const int64_t c0 = v * VEC;
  float mu[VEC], scale[VEC], shift[VEC];
  RN50_UNROLL
  for (int k = 0; k < VEC; ++k) {
    mu[k] = mean[c0 + k];
    scale[k] = weight[c0 + k] * invstd[c0 + k];
    shift[k] = bias[c0 + k];
  }
  const int64_t step = static_cast<int64_t>(p.elementwise_blocks) * p.row_threads;
  for (int64_t r = static_cast<int64_t>(i.by) * p.row_threads + i.ty; r < p.rows; r += U * step) {
    Pack<T, VEC> e[U]{}, add[U]{};
    RN50_UNROLL
    for (int u = 0; u < U; ++u) {
      const int64_t row = p.rows - 1 - (r + u * step);
      if (row >= 0) {
        e[u] = load_pack<T, VEC>(x + row * p.channels + c0);
        if (kResidual) add[u] = load_pack<T, VEC>(residual + row * p.channels + c0);
      }
    }
    RN50_UNROLL
    for (int u = 0; u < U; ++u) {
      const int64_t row = p.rows - 1 - (r + u * step);
      if (row < 0) continue;
      float out[VEC], f[VEC], fr[VEC];
      unpack(e[u], f);
      if (kResidual) unpack(add[u], fr);
      RN50_UNROLL
      for (int k = 0; k < VEC; ++k) {
        float z = fmaf(f[k] - mu[k], scale[k], shift[k]);
        if (kResidual) z += fr[k];
        if (kSilu) {
          out[k] = silu_of(z);
        } else {
          out[k] = (kRelu && z < 0.0f) ? 0.0f : z;  // NaN stays NaN, as in torch.relu
        }
      }
      const Pack<T, VEC> stored = pack_of(out, T{});
      store_pack<T, VEC>(y + row * p.channels + c0, stored);
      // BatchNorm+add+ReLU only: with ReLU alone the extra registers made ptxas spill at that variant's unroll.
      if constexpr (kResidual && kRelu && VEC == 8) {
        if (relu_bits != nullptr) relu_bits[relu_bits_index(row, p.channels, c0)] = relu_bits_of(stored);
      }
    }
  }
}

// ---- backward: reduction ------------------------------------------------------------------------------------------

// Where the backward passes read the incoming gradient of (row, c0..c0+VEC): a dense [rows, channels] tensor here;
// ops/max_pool_kernels_impl.cuh's PoolGatherGrad gathers it from a max-pool's output gradient instead.
template <typename T, int VEC>
struct DenseGrad {
  const T* dy;
  int64_t channels;
  RN50_HD Pack<T, VEC> load(int64_t row, int64_t c0) const { return load_pack<T, VEC>(dy + row * channels + c0); }
};

// Where the reduction reads ReLU's mask: nowhere (no ReLU), the forward's output y (> 0), or one bit an element as the
// forward wrote it (ops/batch_norm_kernels.h's relu_bits: 1/16 of y's bytes in half).
enum class ReluFrom { kNone, kY, kBits };

// Each thread sums g and g * (x - mean) over its rows (first to last) and, with kWriteG, stores g (the residual's
// gradient; exact, since g is dy or zero).
template <typename T, int VEC, ReluFrom kRelu, bool kWriteG, class Grad>
RN50_HD inline void backward_accumulate_from(const Plan& p, const Idx& i, const Grad& dy, const T* __restrict__ y,
                                             const uint8_t* __restrict__ relu_bits, const T* __restrict__ x,
                                             const float* __restrict__ mean, T* __restrict__ g_out, float* s_a,
                                             float* s_b) {
  static_assert(kRelu != ReluFrom::kBits || VEC == 8, "relu_bits hold one byte a vector of 8 elements");
  constexpr int U = kBackwardUnroll;
  const int64_t v = vector_of(p, i);
  float sg[VEC], sgx[VEC];
  RN50_UNROLL
  for (int k = 0; k < VEC; ++k) sg[k] = sgx[k] = 0.0f;
  if (v * VEC < p.channels) {
    const int64_t c0 = v * VEC;
    float mu[VEC];
    RN50_UNROLL
    for (int k = 0; k < VEC; ++k) mu[k] = mean[c0 + k];
    const int64_t step = static_cast<int64_t>(p.reduce_blocks) * p.row_threads;
    for (int64_t r = static_cast<int64_t>(i.by) * p.row_threads + i.ty; r < p.rows; r += U * step) {
      Pack<T, VEC> pg[U]{}, pe[U]{}, po[U]{};
      unsigned pb[U]{};
      RN50_UNROLL
      for (int u = 0; u < U; ++u) {
        const int64_t row = r + u * step;
        if (row < p.rows) {
          pg[u] = dy.load(row, c0);
          pe[u] = load_pack<T, VEC>(x + row * p.channels + c0);
          if (kRelu == ReluFrom::kY) po[u] = load_pack<T, VEC>(y + row * p.channels + c0);
          if (kRelu == ReluFrom::kBits) pb[u] = relu_bits[relu_bits_index(row, p.channels, c0)];
        }
      }
      RN50_UNROLL
      for (int u = 0; u < U; ++u) {
        const int64_t row = r + u * step;
        if (row >= p.rows) continue;
        float g[VEC], f[VEC], fo[VEC];
        unpack(pg[u], g);
        unpack(pe[u], f);
        if (kRelu == ReluFrom::kY) unpack(po[u], fo);
        RN50_UNROLL
        for (int k = 0; k < VEC; ++k) {
          if (kRelu == ReluFrom::kY && !(fo[k] > 0.0f)) g[k] = 0.0f;
          if (kRelu == ReluFrom::kBits && ((pb[u] >> k) & 1U) == 0) g[k] = 0.0f;
          sg[k] += g[k];
          sgx[k] = fmaf(g[k], f[k] - mu[k], sgx[k]);
        }
        if (kWriteG) store<T, VEC>(g_out + row * p.channels + c0, g);
      }
    }
  }
  const int base = i.ty * p.lanes * VEC + i.tx * VEC;
  RN50_UNROLL
  for (int k = 0; k < VEC; ++k) {
    s_a[base + k] = sg[k];
    s_b[base + k] = sgx[k];
  }
}

template <typename T, int VEC, ReluFrom kRelu, bool kWriteG>
RN50_HD inline void backward_accumulate(const Plan& p, const Idx& i, const T* __restrict__ dy, const T* __restrict__ y,
                                        const uint8_t* __restrict__ relu_bits, const T* __restrict__ x,
                                        const float* __restrict__ mean, T* __restrict__ g_out, float* s_a, float* s_b) {
  backward_accumulate_from<T, VEC, kRelu, kWriteG>(p, i, DenseGrad<T, VEC>{dy, p.channels}, y, relu_bits, x, mean,
                                                   g_out, s_a, s_b);
}

// The same for BatchNorm+SiLU: g = dy * silu'(z), with z = (x - mean) * weight * invstd + bias recomputed as the forward
// computed it (SiLU's gradient needs its input, which the forward did not keep).
template <typename T, int VEC>
RN50_HD inline void backward_accumulate_silu(const Plan& p, const Idx& i, const T* __restrict__ dy,
                                             const T* __restrict__ x, const float* __restrict__ mean,
                                             const float* __restrict__ weight, const float* __restrict__ bias,
                                             const float* __restrict__ invstd, float* s_a, float* s_b) {
  constexpr int U = kBackwardUnroll;
  const int64_t v = vector_of(p, i);
  float sg[VEC], sgx[VEC];
  RN50_UNROLL
  for (int k = 0; k < VEC; ++k) sg[k] = sgx[k] = 0.0f;
  if (v * VEC < p.channels) {
    const int64_t c0 = v * VEC;
    float mu[VEC], scale[VEC], shift[VEC];
    RN50_UNROLL
    for (int k = 0; k < VEC; ++k) {
      mu[k] = mean[c0 + k];
      scale[k] = weight[c0 + k] * invstd[c0 + k];
      shift[k] = bias[c0 + k];
    }
    const int64_t step = static_cast<int64_t>(p.reduce_blocks) * p.row_threads;
    for (int64_t r = static_cast<int64_t>(i.by) * p.row_threads + i.ty; r < p.rows; r += U * step) {
      Pack<T, VEC> pg[U]{}, pe[U]{};
      RN50_UNROLL
      for (int u = 0; u < U; ++u) {
        const int64_t row = r + u * step;
        if (row < p.rows) {
          pg[u] = load_pack<T, VEC>(dy + row * p.channels + c0);
          pe[u] = load_pack<T, VEC>(x + row * p.channels + c0);
        }
      }
      RN50_UNROLL
      for (int u = 0; u < U; ++u) {
        const int64_t row = r + u * step;
        if (row >= p.rows) continue;
        float g[VEC], f[VEC];
        unpack(pg[u], g);
        unpack(pe[u], f);
        RN50_UNROLL
        for (int k = 0; k < VEC; ++k) {
          g[k] *= silu_grad(fmaf(f[k] - mu[k], scale[k], shift[k]));
          sg[k] += g[k];
          sgx[k] = fmaf(g[k], f[k] - mu[k], sgx[k]);
        }
      }
    }
  }
  const int base = i.ty * p.lanes * VEC + i.tx * VEC;
  RN50_UNROLL
  for (int k = 0; k < VEC; ++k) {
    s_a[base + k] = sg[k];
    s_b[base + k] = sgx[k];
  }
}

struct GradOut {
  const float* invstd;
  float* dweight;
  float* dbias;
};

RN50_HD inline void finalize_backward(const Plan& p, int tx, int bx, const double* s_a, const double* s_b,
                                      const GradOut& out) {
  const int64_t c = static_cast<int64_t>(bx) * kFinalizeChannels + tx;
  if (c >= p.channels) return;
  double a, b;
  finalize_sum(tx, s_a, s_b, a, b);
  out.dbias[c] = static_cast<float>(a);
  out.dweight[c] = static_cast<float>(b * static_cast<double>(out.invstd[c]));
}

// ---- backward: dx --------------------------------------------------------------------------------------------------

// Where g comes from: dy as is (no activation), dy masked by y > 0 (ReLU), or g as the reduction stored it (ReLU and
// residual), or dy times SiLU's gradient at the recomputed z.
enum class GradSource { kDy, kDyMasked, kStored, kDySilu };

struct DxCoefficients {
  const float* weight;
  const float* mean;
  const float* invstd;
  const float* dweight;
  const float* dbias;
  bool batch_stats;
  const float* bias = nullptr;  // kDySilu: to recompute z
};

// dx = A * g + B * (x - mean) + D per channel: A = w * invstd, B = -A * invstd * dweight / M, D = -A * dbias / M with
// batch statistics; B = D = 0 with running ones. dx_lanes gives them for channels c0..c0+VEC over M rows (and SiLU's
// bias, to recompute z), dx_of one element's dx.
template <int VEC>
struct DxLanes {
  float mu[VEC], a[VEC], b[VEC], d[VEC], shift[VEC];
};

template <int VEC>
RN50_HD inline DxLanes<VEC> dx_lanes(const DxCoefficients& co, int64_t c0, int64_t rows, bool silu) {
  const float inv_m = static_cast<float>(1.0 / static_cast<double>(rows));
  DxLanes<VEC> l;
  RN50_UNROLL
  for (int k = 0; k < VEC; ++k) {
    const float is = co.invstd[c0 + k];
    l.mu[k] = co.mean[c0 + k];
    l.a[k] = co.weight[c0 + k] * is;
    l.shift[k] = silu ? co.bias[c0 + k] : 0.0f;
    l.b[k] = co.batch_stats ? -l.a[k] * is * co.dweight[c0 + k] * inv_m : 0.0f;
    l.d[k] = co.batch_stats ? -l.a[k] * co.dbias[c0 + k] * inv_m : 0.0f;
  }
  return l;
}

template <int VEC>
RN50_HD inline float dx_of(const DxLanes<VEC>& l, int k, float g, float x) {
  return fmaf(l.a[k], g, fmaf(l.b[k], x - l.mu[k], l.d[k]));
}

// Rows run last to first (the reduction ran first to last).
template <typename T, int VEC, GradSource kSource, class Grad>
RN50_HD inline void dx_rows_from(const Plan& p, const Idx& i, const Grad& grad, const T* __restrict__ y,
                                 const T* __restrict__ x, const DxCoefficients& co, T* __restrict__ dx) {
  constexpr int U = kSource == GradSource::kDyMasked ? kElementwiseUnroll3 : kElementwiseUnroll2;
  const int64_t v = vector_of(p, i);
  if (v * VEC >= p.channels) return;
  const int64_t c0 = v * VEC;
  const DxLanes<VEC> l = dx_lanes<VEC>(co, c0, p.rows, kSource == GradSource::kDySilu);
  const int64_t step = static_cast<int64_t>(p.elementwise_blocks) * p.row_threads;
  for (int64_t r = static_cast<int64_t>(i.by) * p.row_threads + i.ty; r < p.rows; r += U * step) {
    Pack<T, VEC> pg[U]{}, pe[U]{}, po[U]{};
    RN50_UNROLL
    for (int u = 0; u < U; ++u) {
      const int64_t row = p.rows - 1 - (r + u * step);
      if (row >= 0) {
        pg[u] = grad.load(row, c0);
        pe[u] = load_pack<T, VEC>(x + row * p.channels + c0);
        if (kSource == GradSource::kDyMasked) po[u] = load_pack<T, VEC>(y + row * p.channels + c0);
      }
    }
    RN50_UNROLL
    for (int u = 0; u < U; ++u) {
      const int64_t row = p.rows - 1 - (r + u * step);
      if (row < 0) continue;
      float result[VEC], g[VEC], f[VEC], fo[VEC];
      unpack(pg[u], g);
      unpack(pe[u], f);
      if (kSource == GradSource::kDyMasked) unpack(po[u], fo);
      RN50_UNROLL
      for (int k = 0; k < VEC; ++k) {
        if (kSource == GradSource::kDyMasked && !(fo[k] > 0.0f)) g[k] = 0.0f;
        // a[k] is weight * invstd: the forward's scale, so z is what the forward computed.
        if (kSource == GradSource::kDySilu) g[k] *= silu_grad(fmaf(f[k] - l.mu[k], l.a[k], l.shift[k]));
        result[k] = dx_of(l, k, g[k], f[k]);
      }
      store<T, VEC>(dx + row * p.channels + c0, result);
    }
  }
}

template <typename T, int VEC, GradSource kSource>
RN50_HD inline void dx_rows(const Plan& p, const Idx& i, const T* __restrict__ grad, const T* __restrict__ y,
                            const T* __restrict__ x, const DxCoefficients& co, T* __restrict__ dx) {
  dx_rows_from<T, VEC, kSource>(p, i, DenseGrad<T, VEC>{grad, p.channels}, y, x, co, dx);
}

}  // namespace rn50::ops::kernels::impl
