// ops/layer_norm_kernels.h: rn50's row kernels for LayerNorm models: residual add + LayerNorm over the last dimension,
// and ConvNeXt's layer scale + stochastic depth + residual, forward and backward: raw pointers, sizes and a stream.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace rn50::ops::kernels {

// How the kernels split a [rows, width] tensor: one warp a row, each lane holding `items` vectors of `vec` elements
// (width == 32 * vec * items), 8 rows a block at a time. make_row_plan() fills it; the launches take it back, so that a
// caller can size the workspace first.
struct RowPlan {
  int64_t rows = 0;
  int64_t width = 0;
  int vec = 1;
  int items = 1;
  int blocks = 1;              // the grid of the forward and backward row kernels (grid-stride over rows)
  size_t workspace_bytes = 0;  // the backward's two float partials per block and column
  bool supported = false;      // false: width is not 32 * vec * items for any vec in {1, 2, 4, 8}, items <= 4
};

// The plan for `rows` rows of `width` on `device` (its SM count sets the grid). `max_vec`: the widest vector every
// pointer of the launch allows (16-byte aligned pointers allow 8).
RowPlan make_row_plan(int64_t rows, int64_t width, int max_vec, int device);

// s = x + branch (branch null: s = x, nothing written to `sum`); y = (s - mean) * rstd * weight + bias over each row,
// rstd = 1 / sqrt(biased var + eps); mean and rstd (float [rows]) kept for the backward. Sums in float.
template <typename X, typename B, typename Y>
struct LayerNormForwardArgs {
  const X* x = nullptr;
  const B* branch = nullptr;
  X* sum = nullptr;  // with a branch
  Y* y = nullptr;
  const float* weight = nullptr;
  const float* bias = nullptr;
  float* mean = nullptr;
  float* rstd = nullptr;
  float eps = 1e-5f;
};

template <typename X, typename B, typename Y>
void layer_norm_forward(const RowPlan& plan, const LayerNormForwardArgs<X, B, Y>& args, cudaStream_t stream);

// With xhat = (s - mean) * rstd and g = dy * weight: ds = rstd * (g - mean(g) - xhat * mean(g * xhat)) + dsum (dsum, the
// gradient s gets from its other users, may be null), written to dx and, where not null, to dbranch in the branch's
// dtype; dweight = sum over rows of dy * xhat, dbias = sum of dy (float [width]).
template <typename X, typename B, typename Y>
struct LayerNormBackwardArgs {
  const Y* dy = nullptr;
  const X* s = nullptr;
  const X* dsum = nullptr;
  const float* weight = nullptr;
  const float* mean = nullptr;
  const float* rstd = nullptr;
  X* dx = nullptr;
  B* dbranch = nullptr;
  float* dweight = nullptr;
  float* dbias = nullptr;
  void* workspace = nullptr;  // plan.workspace_bytes
};

template <typename X, typename B, typename Y>
void layer_norm_backward(const RowPlan& plan, const LayerNormBackwardArgs<X, B, Y>& args, cudaStream_t stream);

// out = x + scale[row / rows_per_sample] * gamma * y over [rows, width] (scale null: 1): ConvNeXt's block tail, its
// layer scale (gamma, float [width]), stochastic depth (scale: 0 or 1 / survival per sample) and residual add.
template <typename X, typename Y>
struct ScaledResidualForwardArgs {
  const X* x = nullptr;
  const Y* y = nullptr;
  const float* gamma = nullptr;
  const float* scale = nullptr;
  int64_t rows_per_sample = 1;
  X* out = nullptr;
};

template <typename X, typename Y>
void scaled_residual_forward(const RowPlan& plan, const ScaledResidualForwardArgs<X, Y>& args, cudaStream_t stream);

// dy = scale * gamma * dout (in y's dtype), dgamma = sum over rows of scale * y * dout (float [width]); x's gradient is
// dout itself.
template <typename X, typename Y>
struct ScaledResidualBackwardArgs {
  const X* dout = nullptr;
  const Y* y = nullptr;
  const float* gamma = nullptr;
  const float* scale = nullptr;
  int64_t rows_per_sample = 1;
  Y* dy = nullptr;
  float* dgamma = nullptr;
  void* workspace = nullptr;  // plan.workspace_bytes
};

template <typename X, typename Y>
void scaled_residual_backward(const RowPlan& plan, const ScaledResidualBackwardArgs<X, Y>& args, cudaStream_t stream);

}  // namespace rn50::ops::kernels
