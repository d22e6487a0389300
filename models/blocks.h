// models/blocks.h: what several models share: BatchNorm with its activation (the fusion points), LayerNorm over
// the last or the channel dimension, Linear, GELU, stochastic depth, torchvision's truncated-normal initialisation.
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>

#include "models/model.h"
#include "ops/fused_batch_norm.h"
#include "ops/fused_layer_norm.h"

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

// The dtype the next matrix product or convolution computes in: CUDA autocast's where it is on for a CUDA x, else x's.
// A LayerNorm whose output feeds one can hand it over in that dtype: the cast the product would make.
at::ScalarType compute_dtype(const at::Tensor& x);

// The dtype ATen's layer_norm returns for x: float32 under CUDA autocast (its float32 list), else x's.
at::ScalarType layer_norm_dtype(const at::Tensor& x);

// y = LayerNorm(x + branch?) over the last dimension (torch.nn.LayerNorm on NHWC or [N, tokens, C] input) in
// `out_dtype`, and the sum: ATen's ops with fusion off, rn50's fused kernels otherwise where they take the case
// (ops/fused_layer_norm.h). `branch` may be undefined.
ops::AddLayerNormOut add_layer_norm(const at::Tensor& x, const at::Tensor& branch, const torch::nn::LayerNorm& norm,
                                    at::ScalarType out_dtype, const ModelOptions& options);

// torchvision's LayerNorm2d: LayerNorm over the channels of an NCHW tensor (permuted to NHWC and back, as
// torchvision does, so the result has the same memory layout), in `out_dtype`.
at::Tensor layer_norm_channels(const at::Tensor& x, const torch::nn::LayerNorm& norm, at::ScalarType out_dtype,
                               const ModelOptions& options);

// fc(x) as PyTorch's Python runs it (at::linear): on input of more than two dimensions the bias is added in the
// matrix product's epilogue, where the C++ frontend's nn::Linear::forward adds it in a separate broadcast pass (on an
// H200 those passes took 11.8 ms of ViT-B/16's 84 ms step at batch 256; bench/results/2026-12-03-linear-bias.md).
at::Tensor linear(const torch::nn::Linear& fc, const at::Tensor& x);

// GELU with the exact erf (torch.nn.GELU's default): ATen's op either way.
at::Tensor gelu(const at::Tensor& x, const ModelOptions& options);

// torchvision.ops.StochasticDepth in "row" mode: in training each sample's branch is zeroed with probability p and
// the survivors scaled by 1 / (1 - p); the identity in evaluation or for p == 0.
at::Tensor stochastic_depth(const at::Tensor& x, double p, bool training);

// StochasticDepth's per-sample scale for a batch like x: float32 [N] of 0 or 1 / (1 - p) drawn as torchvision draws
// it; undefined (no scale) in evaluation or for p == 0.
at::Tensor stochastic_depth_scale(const at::Tensor& x, double p, bool training);

// A ModelOptions probability (stochastic_depth, dropout): below 0 gives torchvision's default, above 1 is a
// ConfigError naming `key`.
double probability_or_default(double requested, double torchvision_default, const char* key);

// torch.nn.init.trunc_normal_: normal(mean, std) truncated to [a, b] (absolute bounds), by inverting the CDF.
void trunc_normal_(at::Tensor t, double std, double mean = 0.0, double a = -2.0, double b = 2.0);

}  // namespace rn50::models
