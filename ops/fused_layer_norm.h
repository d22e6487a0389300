// ops/fused_layer_norm.h: the fused ops of LayerNorm models (ViT, ConvNeXt) as autograd ops: residual add + LayerNorm
// over the last dimension, and ConvNeXt's layer scale + stochastic depth + residual add; rn50's row kernels on the GPU,
// ATen's separate ops everywhere else.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/ScalarType.h>

#include <string>

namespace rn50::ops {

struct AddLayerNormOut {
  at::Tensor sum;  // x + branch (undefined without a branch)
  at::Tensor y;    // LayerNorm of the sum (or of x), in the asked dtype
};

// s = x + branch (branch may be undefined: s = x), y = layer_norm(s, [width], weight, bias, eps) converted to
// `out_dtype`, with the semantics of ATen's add (type promotion), layer_norm and to(): under CUDA autocast layer_norm
// computes in float32, and a half-precision `out_dtype` is the cast the next matrix product would make. Gradients flow
// to x, branch, weight and bias. `fused`: rn50's kernels where fused_layer_norm_unsupported_reason() is empty; false
// runs ATen's ops (the reference, and what fusion: off runs). x and branch: [..., width] of one shape; weight and bias
// float32 [width]. Throws std::invalid_argument on inconsistent arguments.
AddLayerNormOut add_layer_norm(const at::Tensor& x, const at::Tensor& branch, const at::Tensor& weight,
                               const at::Tensor& bias, double eps, at::ScalarType out_dtype, bool fused);

// out = x + (gamma * y) * scale: ConvNeXt's block tail (torchvision's layer_scale * block(x), StochasticDepth's
// per-sample scale, then the residual add), in that order. x: the block's input [N, C, H, W], channels-last on the
// fused path; y: the branch [N, C, H, W] (also a permuted NHWC tensor); gamma: float32 with C elements; scale:
// float32 with N elements (0 or 1 / survival), or undefined for none. Gradients flow to x, y and gamma.
at::Tensor scaled_residual(const at::Tensor& x, const at::Tensor& y, const at::Tensor& gamma, const at::Tensor& scale,
                           bool fused);

// Why add_layer_norm with these arguments would run ATen's ops (empty: rn50's kernels): e.g. "on the CPU", "width 100
// (the kernels take multiples of 32 up to 1024)", "dtypes float, half -> bfloat16": for the start-up table.
std::string fused_layer_norm_unsupported_reason(const at::Tensor& x, const at::Tensor& branch,
                                                at::ScalarType out_dtype);

}  // namespace rn50::ops
