// ops/conv_bn_kernels.h: the small kernels between fused convolutions (ops/fused_conv.h): BatchNorm's finalize from
// the convolution's sums, the block output's scale-bias(+scale-bias or add)+ReLU, and BatchNorm's input gradient from
// the coefficients the data gradient's epilogue made. Channels-last [rows, C] data; raw pointers, no ATen.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace rn50::ops::kernels {

// From a batch's per-channel sum and sum of squares over `count` values: mean, invstd = 1/sqrt(biased var + eps),
// the affine's equivalent scale = weight * invstd and bias = bias - mean * scale; running_mean and running_var (the
// unbiased variance) updated in place with `momentum` where not null. In double; one thread a channel.
struct FinalizeArgs {
  const float* sum = nullptr;
  const float* sq_sum = nullptr;
  const float* weight = nullptr;
  const float* bias = nullptr;
  float* running_mean = nullptr;
  float* running_var = nullptr;
  float* mean = nullptr;
  float* invstd = nullptr;
  float* scale = nullptr;
  float* shift = nullptr;
  int64_t* num_batches_tracked = nullptr;  // incremented once where not null
  int64_t channels = 0;
  int64_t count = 0;
  double momentum = 0.1, eps = 1e-5;
};
void bn_finalize(const FinalizeArgs& args, cudaStream_t stream);

// out = relu?(x * scale[c] + shift[c] + r), r = residual * rscale[c] + rshift[c] where rscale is given, the residual
// itself where only it is, else 0. T: __half or __nv_bfloat16 (as void pointers: the dtype in `half`).
struct ApplyArgs {
  const void* x = nullptr;
  const float* scale = nullptr;
  const float* shift = nullptr;
  const void* residual = nullptr;
  const float* rscale = nullptr;
  const float* rshift = nullptr;
  void* out = nullptr;
  // Where not null (with relu): ReLU's mask, one bit an element, bit k of byte (row * C + c0) / 8 set where out at
  // channel c0 + k is positive as stored: what the block output's BatchNorm backward reads instead of out
  // (ops/batch_norm_kernels.h's relu_bits). Needs C a multiple of 8 and 16-byte aligned tensors (else
  // invalid_argument).
  uint8_t* relu_bits = nullptr;
  int64_t rows = 0, channels = 0;
  bool relu = true;
  bool half = true;  // false: bfloat16
};
void bn_apply(const ApplyArgs& args, cudaStream_t stream);

// dx = eq_dy[c] * dz + eq_x[c] * x + eq_bias[c] (BatchNorm's input gradient from its backward weights).
struct DbnApplyArgs {
  const void* dz = nullptr;
  const void* x = nullptr;
  const float* eq_dy = nullptr;
  const float* eq_x = nullptr;
  const float* eq_bias = nullptr;
  void* dx = nullptr;
  int64_t rows = 0, channels = 0;
  bool half = true;
};
void dbn_apply(const DbnApplyArgs& args, cudaStream_t stream);

}  // namespace rn50::ops::kernels
