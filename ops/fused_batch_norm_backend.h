// ops/fused_batch_norm_backend.h: what the dispatch (ops/fused_batch_norm.cpp) asks of the fused kernels' glue, with no
// CUDA types, so that every build compiles the dispatch: CUDA builds link ops/fused_batch_norm_cuda.cpp, CPU builds
// ops/fused_batch_norm_none.cpp.
#pragma once

#include <ATen/core/Tensor.h>

#include <string>

#include "ops/fused_batch_norm.h"
#include "ops/max_pool_geometry.h"

namespace rn50::ops::detail {

// True when the CUDA glue is linked (a CUDA build).
bool built_with_cuda();

// kAuto's choice in training: cuDNN's fused kernels for BatchNorm+ReLU, whose backward ran faster than rn50's for
// most of ResNet-50's shapes on the H200, rn50's for BatchNorm+add+ReLU and BatchNorm alone, where rn50's were faster
// both ways (tests/ops/bench_fused_batch_norm.cpp; docs/fused-kernels.md).
inline bool auto_prefers_cudnn(bool residual, bool relu) { return relu && !residual; }

// The kernels a fused forward ran; its backward runs the same family (cuDNN's reserve space suits only cuDNN).
enum class Ran { kOwn = 0, kCudnn = 1 };

// x and residual (undefined: none) are channels-last CUDA tensors of one dtype; the state's tensors float32 [C].
struct ForwardIn {
  at::Tensor x, residual, weight, bias, running_mean, running_var;
  double momentum = 0.1, eps = 1e-5;
  bool training = true, relu = true;
  bool silu = false;  // SiLU instead of ReLU (relu false, no residual): rn50's kernels only
  BnKernels kernels = BnKernels::kAuto;
  bool stats_only = false;  // training: mean, invstd and the running statistics alone, y undefined (rn50's kernels)
  // rn50's kernels in training with a residual and ReLU: also write ReLU's mask as bits (ForwardOut::relu_bits) where
  // the plan runs 16-byte vectors of half or bfloat16, for the backward's reduction to read instead of y.
  bool relu_bits = false;
};

// y: the output; mean and invstd (float32 [C]): the batch's in training, the running statistics' in evaluation;
// reserve: cuDNN's reserve space (undefined for rn50's kernels).
struct ForwardOut {
  at::Tensor y, mean, invstd, reserve;
  at::Tensor relu_bits;  // uint8 [numel / 8] where ForwardIn::relu_bits was asked for and the plan allowed it
  Ran ran = Ran::kOwn;
};

ForwardOut forward(const ForwardIn& in);

struct BackwardIn {
  at::Tensor dy, x, y, weight, bias, mean, invstd, reserve;
  bool has_residual = false, relu = true, training = true;
  bool silu = false;
  double eps = 1e-5;
  BnKernels kernels = BnKernels::kAuto;
  Ran ran = Ran::kOwn;
  // rn50's kernels with ReLU: its mask as one bit an element (ForwardOut::relu_bits, ops/fused_conv.h's
  // bn_apply_relu_bits), read instead of y where the plan allows (half or bfloat16, every tensor 16-byte aligned so
  // that it runs 16-byte vectors); ignored elsewhere, so keep y unless a misaligned input cannot occur.
  at::Tensor relu_bits;
  // Instead of dy (left undefined): the output gradient and positions of the max-pool whose input is this BatchNorm's
  // output (ops/max_pool.h's bn_relu_max_pool2d, training, no activation), and x at each output's max: rn50's kernels
  // sum dweight and dbias over the pool's outputs and gather dy for dx as they read it.
  at::Tensor pool_dy, pool_positions, pool_x_at;
  kernels::PoolShape pool_shape;
};

// dresidual: undefined without a residual.
struct BackwardOut {
  at::Tensor dx, dweight, dbias, dresidual;
};

BackwardOut backward(const BackwardIn& in);

// See rn50::ops::cudnn_unsupported_reason.
std::string cudnn_unsupported_reason(const at::Tensor& x, bool residual, bool relu);

}  // namespace rn50::ops::detail
