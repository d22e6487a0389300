// ops/fused_batch_norm.h: BatchNorm(+residual add)+ReLU as one autograd op, fused on the GPU for channels-last
// tensors (cuDNN's fused kernels or rn50's own), with ATen's separate ops everywhere else.
#pragma once

#include <ATen/core/Tensor.h>

#include <string>

#include "ops/bn_kernels.h"

namespace rn50::ops {

// What follows the BatchNorm (and its residual add): nothing, ReLU, or SiLU (x * sigmoid(x), without a residual).
enum class Activation { kNone, kRelu, kSilu };

// The BatchNorm's tensors and settings, as torch::nn::BatchNorm2d holds them (weight, bias, running_mean, running_var
// float32 [C]; num_batches_tracked int64 0-dim).
struct BatchNormState {
  at::Tensor weight, bias, running_mean, running_var, num_batches_tracked;
  double momentum = 0.1, eps = 1e-5;
  bool training = true;
};

// y = relu?(batch_norm(x) + residual?), with torch::nn::BatchNorm2d's semantics: in training the batch statistics
// (biased variance to normalise), running_mean/var updated in place with momentum (running_var with the unbiased
// variance), num_batches_tracked += 1; in evaluation the running statistics. `residual` may be undefined (no add); when
// defined it has x's shape and dtype (a layout other than x's costs a copy). Gradients flow to x, weight, bias and
// residual. x must be 4-D [N, C, H, W]. Fused where fused_unsupported_reason(x) is empty and the state's tensors are
// float32 [C] on x's device; elsewhere (CPU, NCHW, other dtypes, no affine or no running statistics) ATen's ops compute
// the same. Throws std::invalid_argument on inconsistent arguments, and for kCudnn where cuDNN does not take the case.
at::Tensor batch_norm_act(const at::Tensor& x, const BatchNormState& bn, const at::Tensor& residual, bool relu,
                          BnKernels kernels = BnKernels::kAuto);
// The same with any activation: kSilu runs rn50's kernels where the fused path runs (cuDNN's fused BatchNorm takes
// ReLU alone), and takes no residual (std::invalid_argument).
at::Tensor batch_norm_act(const at::Tensor& x, const BatchNormState& bn, const at::Tensor& residual,
                          Activation activation, BnKernels kernels = BnKernels::kAuto);

// The argument checks batch_norm_act makes first, whichever path runs: std::invalid_argument naming the mistake.
void check_batch_norm_args(const at::Tensor& x, const BatchNormState& bn, const at::Tensor& residual);

// Why the state's tensors keep a call on x off the fused kernels (empty: they do not), e.g. "no running statistics".
std::string batch_norm_state_unsupported_reason(const at::Tensor& x, const BatchNormState& bn);

// num_batches_tracked += 1 in training, as torch::nn::BatchNorm2d's forward does (the fused ops' dispatch calls it).
void count_batch_norm_step(const BatchNormState& bn);

// Why batch_norm_act would not use fused kernels for such an x (empty: it would), e.g. "on the CPU", "NCHW layout",
// "this rn50 was built without CUDA": for a log line at start.
std::string fused_unsupported_reason(const at::Tensor& x);

// Why cuDNN's fused kernels would not take this case (empty: they would, as far as cuDNN's size queries tell; the call
// itself can still refuse, and kAuto then runs rn50's kernels). Asks cuDNN for a CUDA x.
std::string cudnn_unsupported_reason(const at::Tensor& x, bool residual, bool relu);

// The kernels batch_norm_act would run for such a call: "cuDNN", "rn50", "rn50 (cuDNN: <why not>)" for kAuto,
// "ATen (<why>)", or "none (cuDNN: <why not>)" for a kCudnn it would refuse.
std::string describe_kernels(const at::Tensor& x, bool residual, bool relu, BnKernels kernels = BnKernels::kAuto,
                             bool training = true);
std::string describe_kernels(const at::Tensor& x, bool residual, Activation activation,
                             BnKernels kernels = BnKernels::kAuto, bool training = true);

}  // namespace rn50::ops
