// ops/layer_norm_kernels_impl.cuh: the arithmetic and index mapping of rn50's row kernels (ops/layer_norm_kernels.h)
// as functions of one lane's indices, split at the warp reductions and barriers, so that the kernels
// (ops/layer_norm_kernels.cu) and a host emulation of them (tests/ops/test_layer_norm_kernels_host.cpp) run the same
// code.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "ops/batch_norm_kernels_impl.cuh"  // RN50_HD, RN50_UNROLL, to_float
#include "ops/layer_norm_kernels.h"

namespace rn50::ops::kernels::rows {

constexpr int kWarp = 32;
constexpr int kRowsPerBlock = 8;          // warps a block, each on its own row
constexpr int kThreads = kWarp * kRowsPerBlock;
constexpr int kMaxItems = 4;              // vectors a lane holds of one row
constexpr int kMaxVec = 8;                // elements a vector: 16 bytes of half precision
constexpr int kMaxWidth = kWarp * kMaxVec * kMaxItems;  // 1024: the backward's shared memory holds a row per warp
constexpr int kBackwardBlocksPerSm = 4;   // one wave of backward blocks; each keeps one partial per column
constexpr int kForwardBlocksPerSm = 16;   // forward grids stride over rows from there
constexpr int kFinalizeThreads = 256;     // the column finalize: one thread a column

inline RowPlan make_row_plan_for(int64_t rows, int64_t width, int max_vec, int sm_count) {
  RowPlan p;
  p.rows = rows;
  p.width = width;
  if (rows < 1 || width < kWarp || width % kWarp != 0 || width > kMaxWidth) return p;
  for (int vec = kMaxVec; vec >= 1; vec /= 2) {
    if (vec > max_vec || width % (static_cast<int64_t>(kWarp) * vec) != 0) continue;
    const int64_t items = width / (static_cast<int64_t>(kWarp) * vec);
    if (items > kMaxItems) break;  // narrower vectors only need more items
    p.vec = vec;
    p.items = static_cast<int>(items);
    p.supported = true;
    break;
  }
  if (!p.supported) return p;
  const int64_t row_blocks = (rows + kRowsPerBlock - 1) / kRowsPerBlock;
  p.blocks = static_cast<int>(std::max<int64_t>(
      1, std::min<int64_t>(row_blocks, static_cast<int64_t>(sm_count) * kBackwardBlocksPerSm)));
  p.workspace_bytes = 2 * static_cast<size_t>(p.blocks) * static_cast<size_t>(width) * sizeof(float);
  return p;
}

// The forward's grid: rows / 8 blocks, capped where a grid-stride loop takes over.
inline int forward_blocks(const RowPlan& p, int sm_count) {
  const int64_t row_blocks = (p.rows + kRowsPerBlock - 1) / kRowsPerBlock;
  return static_cast<int>(std::max<int64_t>(
      1, std::min<int64_t>(row_blocks, static_cast<int64_t>(sm_count) * kForwardBlocksPerSm)));
}

// ---- vector access --------------------------------------------------------------------------------------------------

// V elements of T as one access of up to 16 bytes (two for 8 floats): the row kernels are bound by memory.
template <typename T, int V>
struct alignas(sizeof(T) * V >= 16 ? 16 : sizeof(T) * V) Vec {
  T v[V];
};

RN50_HD inline float to_float(float v) { return v; }
RN50_HD inline float to_float(__half v) { return __half2float(v); }
RN50_HD inline float to_float(__nv_bfloat16 v) { return impl::to_float(v); }

RN50_HD inline void from_float(float f, float& out) { out = f; }
RN50_HD inline void from_float(float f, __half& out) { out = __float2half_rn(f); }
RN50_HD inline void from_float(float f, __nv_bfloat16& out) { out = __float2bfloat16_rn(f); }

template <typename T, int V>
RN50_HD inline void load_vec(const T* __restrict__ p, float* f) {
  const Vec<T, V> a = *reinterpret_cast<const Vec<T, V>*>(p);
  RN50_UNROLL
  for (int k = 0; k < V; ++k) f[k] = to_float(a.v[k]);
}

template <typename T, int V>
RN50_HD inline void store_vec(T* __restrict__ p, const float* f) {
  Vec<T, V> a;
  RN50_UNROLL
  for (int k = 0; k < V; ++k) from_float(f[k], a.v[k]);
  *reinterpret_cast<Vec<T, V>*>(p) = a;
}

// Where a lane's item k starts in its row: consecutive lanes take consecutive vectors, so a warp's loads coalesce.
RN50_HD inline int64_t item_offset(int lane, int k, int vec) { return (static_cast<int64_t>(k) * kWarp + lane) * vec; }

// A lane's values of one row: kMaxItems vectors of V, of which plan.items are used.
template <int V>
using Lane = float[kMaxItems * V];

// ---- residual add + LayerNorm, forward ------------------------------------------------------------------------------

// Phase one: s = x + branch into the lane's registers; returns the lane's sum of s.
template <typename X, typename B, int V, bool kBranch>
RN50_HD inline float ln_load(const RowPlan& p, int lane, int64_t row, const X* __restrict__ x,
                             const B* __restrict__ branch, Lane<V>& s) {
  float sum = 0.0f;
  RN50_UNROLL
  for (int k = 0; k < kMaxItems; ++k) {
    if (k >= p.items) break;
    const int64_t at = row * p.width + item_offset(lane, k, V);
    load_vec<X, V>(x + at, s + k * V);
    if (kBranch) {
      float b[V];
      load_vec<B, V>(branch + at, b);
      RN50_UNROLL
      for (int e = 0; e < V; ++e) s[k * V + e] += b[e];
    }
    RN50_UNROLL
    for (int e = 0; e < V; ++e) sum += s[k * V + e];
  }
  return sum;
}

// Phase two: the lane's sum of (s - mean)^2 (two passes over registers: no cancellation for rows far from zero).
template <int V>
RN50_HD inline float ln_square(const RowPlan& p, const Lane<V>& s, float mean) {
  float sq = 0.0f;
  RN50_UNROLL
  for (int k = 0; k < kMaxItems; ++k) {
    if (k >= p.items) break;
    RN50_UNROLL
    for (int e = 0; e < V; ++e) {
      const float d = s[k * V + e] - mean;
      sq = fmaf(d, d, sq);
    }
  }
  return sq;
}

RN50_HD inline float ln_rstd(float square_sum, int64_t width, float eps) {
  return 1.0f / sqrtf(square_sum / static_cast<float>(width) + eps);
}

// Phase three: the sum (with a branch) and y.
template <typename X, typename Y, int V, bool kBranch>
RN50_HD inline void ln_store(const RowPlan& p, int lane, int64_t row, const Lane<V>& s, float mean, float rstd,
                             const float* __restrict__ weight, const float* __restrict__ bias, X* __restrict__ sum,
                             Y* __restrict__ y) {
  RN50_UNROLL
  for (int k = 0; k < kMaxItems; ++k) {
    if (k >= p.items) break;
    const int64_t col = item_offset(lane, k, V);
    const int64_t at = row * p.width + col;
    float w[V], b[V], out[V];
    RN50_UNROLL
    for (int e = 0; e < V; ++e) {
      w[e] = weight[col + e];
      b[e] = bias[col + e];
      out[e] = fmaf((s[k * V + e] - mean) * rstd, w[e], b[e]);
    }
    if (kBranch) store_vec<X, V>(sum + at, s + k * V);
    store_vec<Y, V>(y + at, out);
  }
}

// ---- residual add + LayerNorm, backward -----------------------------------------------------------------------------

// Phase one: xhat and g = dy * weight into registers, dy * xhat and dy added to the warp's column sums (its rows of
// shared memory, each column touched by one lane only); returns the lane's sums of g and g * xhat through sum_g and
// sum_gx.
template <typename X, typename Y, int V>
RN50_HD inline void lnb_load(const RowPlan& p, int lane, int64_t row, const Y* __restrict__ dy,
                             const X* __restrict__ s, const float* __restrict__ weight, float mean, float rstd,
                             Lane<V>& g, Lane<V>& xhat, float* dweight, float* dbias, float& sum_g, float& sum_gx) {
  sum_g = 0.0f;
  sum_gx = 0.0f;
  RN50_UNROLL
  for (int k = 0; k < kMaxItems; ++k) {
    if (k >= p.items) break;
    const int64_t col = item_offset(lane, k, V);
    const int64_t at = row * p.width + col;
    float d[V], v[V];
    load_vec<Y, V>(dy + at, d);
    load_vec<X, V>(s + at, v);
    RN50_UNROLL
    for (int e = 0; e < V; ++e) {
      const int i = k * V + e;
      xhat[i] = (v[e] - mean) * rstd;
      g[i] = d[e] * weight[col + e];
      dweight[col + e] = fmaf(d[e], xhat[i], dweight[col + e]);
      dbias[col + e] += d[e];
      sum_g += g[i];
      sum_gx = fmaf(g[i], xhat[i], sum_gx);
    }
  }
}

// Phase two: ds = rstd * (g - mean_g - xhat * mean_gx) (+ dsum) to dx and, with a branch, to dbranch.
template <typename X, typename B, int V, bool kDsum, bool kBranch>
RN50_HD inline void lnb_store(const RowPlan& p, int lane, int64_t row, const Lane<V>& g, const Lane<V>& xhat,
                              float mean_g, float mean_gx, float rstd, const X* __restrict__ dsum, X* __restrict__ dx,
                              B* __restrict__ dbranch) {
  RN50_UNROLL
  for (int k = 0; k < kMaxItems; ++k) {
    if (k >= p.items) break;
    const int64_t at = row * p.width + item_offset(lane, k, V);
    float ds[V], extra[V];
    if (kDsum) load_vec<X, V>(dsum + at, extra);
    RN50_UNROLL
    for (int e = 0; e < V; ++e) {
      const int i = k * V + e;
      ds[e] = rstd * (g[i] - mean_g - xhat[i] * mean_gx);
      if (kDsum) ds[e] += extra[e];
    }
    store_vec<X, V>(dx + at, ds);
    if (kBranch) store_vec<B, V>(dbranch + at, ds);
  }
}

// ---- layer scale + stochastic depth + residual ----------------------------------------------------------------------

template <typename X, typename Y, int V, bool kScale>
RN50_HD inline void sr_forward_row(const RowPlan& p, int lane, int64_t row, const X* __restrict__ x,
                                   const Y* __restrict__ y, const float* __restrict__ gamma,
                                   const float* __restrict__ scale, int64_t rows_per_sample, X* __restrict__ out) {
  const float m = kScale ? scale[row / rows_per_sample] : 1.0f;
  RN50_UNROLL
  for (int k = 0; k < kMaxItems; ++k) {
    if (k >= p.items) break;
    const int64_t col = item_offset(lane, k, V);
    const int64_t at = row * p.width + col;
    float fx[V], fy[V], o[V];
    load_vec<X, V>(x + at, fx);
    load_vec<Y, V>(y + at, fy);
    // torchvision's order: (gamma * y) * scale + x, in float.
    RN50_UNROLL
    for (int e = 0; e < V; ++e) o[e] = fx[e] + (gamma[col + e] * fy[e]) * m;
    store_vec<X, V>(out + at, o);
  }
}

template <typename X, typename Y, int V, bool kScale>
RN50_HD inline void sr_backward_row(const RowPlan& p, int lane, int64_t row, const X* __restrict__ dout,
                                    const Y* __restrict__ y, const float* __restrict__ gamma,
                                    const float* __restrict__ scale, int64_t rows_per_sample, Y* __restrict__ dy,
                                    float* dgamma) {
  const float m = kScale ? scale[row / rows_per_sample] : 1.0f;
  RN50_UNROLL
  for (int k = 0; k < kMaxItems; ++k) {
    if (k >= p.items) break;
    const int64_t col = item_offset(lane, k, V);
    const int64_t at = row * p.width + col;
    float fd[V], fy[V], o[V];
    load_vec<X, V>(dout + at, fd);
    load_vec<Y, V>(y + at, fy);
    RN50_UNROLL
    for (int e = 0; e < V; ++e) {
      const float dm = fd[e] * m;  // the gradient of gamma * y
      o[e] = dm * gamma[col + e];
      dgamma[col + e] = fmaf(dm, fy[e], dgamma[col + e]);
    }
    store_vec<Y, V>(dy + at, o);
  }
}

// ---- column sums of the backward kernels ----------------------------------------------------------------------------

// Before a warp's rows: the lane zeroes the columns it will add to in its warp's row of shared memory
// [kRowsPerBlock][width] (the backward keeps its column sums there rather than in registers: room for more warps).
template <int V>
RN50_HD inline void zero_columns(const RowPlan& p, int lane, float* columns) {
  RN50_UNROLL
  for (int k = 0; k < kMaxItems; ++k) {
    if (k >= p.items) break;
    const int64_t col = item_offset(lane, k, V);
    RN50_UNROLL
    for (int e = 0; e < V; ++e) columns[col + e] = 0.0f;
  }
}

// After the barrier: thread `tid` of `threads` adds the warps' rows, in warp order, into the block's partial.
RN50_HD inline void shared_to_partial(const RowPlan& p, int tid, int threads, int block, const float* smem,
                                      float* __restrict__ part) {
  for (int64_t c = tid; c < p.width; c += threads) {
    float a = 0.0f;
    for (int w = 0; w < kRowsPerBlock; ++w) a += smem[w * p.width + c];
    part[static_cast<int64_t>(block) * p.width + c] = a;
  }
}

// Column c's total over the blocks' partials, added in double in block order: deterministic, and exact enough for
// gradients summed over millions of rows.
RN50_HD inline float finalize_column(const RowPlan& p, int64_t c, const float* __restrict__ part) {
  double a = 0.0;
  for (int b = 0; b < p.blocks; ++b) a += part[static_cast<int64_t>(b) * p.width + c];
  return static_cast<float>(a);
}

}  // namespace rn50::ops::kernels::rows
