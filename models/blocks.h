// models/blocks.h: what several models share: BatchNorm with its activation (the fusion points), LayerNorm over
// the last or the channel dimension, GELU, stochastic depth, torchvision's truncated-normal initialisation.
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/nn/modules/batchnorm.h>

#include "models/model.h"
#include "ops/fused_batch_norm.h"

namespace rn50::models {

// The BatchNorm's tensors and settings as the fused ops take them.
ops::BatchNormState state_of(const torch::nn::BatchNorm2d& bn);

// relu?(bn(x) + residual?): ATen's separate ops, as torchvision runs them (fusion off), or one fused op
// (ops::batch_norm_act). `residual` may be undefined.
at::Tensor bn_act(torch::nn::BatchNorm2d bn, const at::Tensor& x, const at::Tensor& residual, bool relu,
                  const ModelOptions& options);

// silu(bn(x)), EfficientNet's Conv2dNormActivation: ATen's separate ops (fusion off), or one fused op (rn50's
// BatchNorm+SiLU kernels where the fused path runs, ATen's ops elsewhere).
at::Tensor norm_act_silu(torch::nn::BatchNorm2d bn, const at::Tensor& x, const ModelOptions& options);

// LayerNorm over the last dimension (torch.nn.LayerNorm on NHWC or [N, tokens, C] input): ATen's op either way.
at::Tensor layer_norm_last(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias, double eps,
                           const ModelOptions& options);

// torchvision's LayerNorm2d: LayerNorm over the channels of an NCHW tensor (permuted to NHWC and back, as
// torchvision does, so the result has the same memory layout).
at::Tensor layer_norm_channels(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias, double eps,
                               const ModelOptions& options);

// GELU with the exact erf (torch.nn.GELU's default): ATen's op either way.
at::Tensor gelu(const at::Tensor& x, const ModelOptions& options);

// torchvision.ops.StochasticDepth in "row" mode: in training each sample's branch is zeroed with probability p and
// the survivors scaled by 1 / (1 - p); the identity in evaluation or for p == 0.
at::Tensor stochastic_depth(const at::Tensor& x, double p, bool training);

// A ModelOptions probability (stochastic_depth, dropout): below 0 gives torchvision's default, above 1 is a
// ConfigError naming `key`.
double probability_or_default(double requested, double torchvision_default, const char* key);

// torch.nn.init.trunc_normal_: normal(mean, std) truncated to [a, b] (absolute bounds), by inverting the CDF.
void trunc_normal_(at::Tensor t, double std, double mean = 0.0, double a = -2.0, double b = 2.0);

}  // namespace rn50::models
