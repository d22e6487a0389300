// ops/batch_norm_kernels.h: rn50's own BatchNorm(+residual add)+ReLU (or +SiLU) kernels for channels-last tensors, training and
// evaluation, forward and backward: raw pointers, sizes and a stream, no ATen.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "ops/max_pool_geometry.h"

namespace rn50::ops::kernels {

// How the kernels split a [rows, channels] tensor (rows = N*H*W; element (row, c) at row * channels + c) over
// threads and blocks. make_plan() fills it; the launches take it back, so that a caller can size the workspace first.
struct Plan {
  int64_t rows = 0;
  int64_t channels = 0;
  int vec = 1;                 // elements per load and store: 16 bytes' worth, or 1 (channels not a multiple)
  int lanes = 1;               // threads across one tile's channel vectors (blockDim.x)
  int row_threads = 1;         // threads across rows (blockDim.y)
  int tiles = 1;               // channel tiles (gridDim.x)
  int reduce_blocks = 1;       // row blocks of the reductions (gridDim.y): one partial per block and channel
  int elementwise_blocks = 1;  // row blocks of the elementwise passes (gridDim.y)
  size_t workspace_bytes = 0;  // two float partials per reduce block and channel
};

// The plan for element type T on `device` (its SM count sets the grid). `aligned16`: every pointer the launch will
// get is 16-byte aligned (vector loads need it, besides channels being a multiple of 16 bytes' worth of T).
template <typename T>
Plan make_plan(int64_t rows, int64_t channels, bool aligned16, int device);

// y = act((x - mean) * invstd * weight + bias (+ residual)), act ReLU, SiLU (no residual) or none. With batch_stats (training) the kernels first compute
// the batch's mean and invstd = 1/sqrt(biased var + eps) into `mean` and `invstd`, and update running_mean and
// running_var (unbiased variance) with `momentum` where those are not null; without, they read `mean` and `invstd`.
template <typename T>
struct ForwardArgs {
  const T* x = nullptr;
  const T* residual = nullptr;  // null: no add
  T* y = nullptr;
  const float* weight = nullptr;
  const float* bias = nullptr;
  float* running_mean = nullptr;
  float* running_var = nullptr;
  float* mean = nullptr;
  float* invstd = nullptr;
  double momentum = 0.1;
  double eps = 1e-5;
  bool relu = true;
  bool silu = false;  // instead of ReLU (relu false), without a residual
  bool batch_stats = true;
  void* workspace = nullptr;  // plan.workspace_bytes, when batch_stats
  // Where not null (a residual and ReLU; half or bfloat16 plans of 16-byte vectors): ReLU's mask as bits, as
  // BackwardArgs::relu_bits reads it, [rows * channels / 8] bytes.
  uint8_t* relu_bits = nullptr;
};
// With y null (and batch_stats) batch_norm_forward computes the statistics alone: ops/norm_pool.h normalises as the
// max-pool reads.

template <typename T>
void batch_norm_forward(const Plan& plan, const ForwardArgs<T>& args, cudaStream_t stream);

// g = dy * (y > 0) with ReLU, dy * silu'(z) with SiLU (z recomputed from x), else dy; dbias = sum(g), dweight = sum(g * xhat) per channel, and
// dx = weight * invstd * (g - dbias / M - xhat * dweight / M) with batch_stats (training), weight * invstd * g without
// (evaluation, where mean and invstd are the running statistics'). `dresidual`, where not null, receives g.
template <typename T>
struct BackwardArgs {
  const T* dy = nullptr;
  const T* x = nullptr;
  const T* y = nullptr;  // the forward's output, for the ReLU mask; unused without ReLU
  // Where not null, the reduction reads ReLU's mask here instead of y: one bit an element, bit k of byte
  // (row * channels + c0) / 8 set where the output of channel c0 + k is positive (ops/conv_bn_kernels.h's bn_apply
  // writes it). Half and bfloat16 plans of 16-byte vectors only; y is still read by dx where no dresidual stores g.
  const uint8_t* relu_bits = nullptr;
  const float* weight = nullptr;
  const float* bias = nullptr;  // SiLU: to recompute z
  const float* mean = nullptr;
  const float* invstd = nullptr;
  T* dx = nullptr;
  T* dresidual = nullptr;
  float* dweight = nullptr;
  float* dbias = nullptr;
  bool relu = true;
  bool silu = false;
  bool batch_stats = true;
  void* workspace = nullptr;  // plan.workspace_bytes
};

template <typename T>
void batch_norm_backward(const Plan& plan, const BackwardArgs<T>& args, cudaStream_t stream);

// batch_norm_backward in training without activation or residual, with args.dy (unused) replaced by a max-pool's input
// gradient, from its output gradient `pool_dy`, positions and x_at (bn_relu_max_pool_forward's; `pool` planned on the
// BatchNorm's x, the pool's input): dweight and dbias summed over the pool's outputs (each output's gradient at x_at),
// dx gathering each input's gradient, rounded to T, as it reads it. The results of max_pool_backward followed by
// batch_norm_backward within float rounding (not bit for bit: those sum each input's gradient rounded to T), without
// the input-sized gradient between them or a gather in the reduction (ops/max_pool.h's bn_relu_max_pool2d).
template <typename T>
void batch_norm_backward_pooled(const Plan& plan, const BackwardArgs<T>& args, const PoolPlan& pool, const T* pool_dy,
                                const uint8_t* positions, const T* x_at, cudaStream_t stream);

}  // namespace rn50::ops::kernels
