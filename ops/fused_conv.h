// ops/fused_conv.h: convolutions that carry BatchNorm's work in their prologue and epilogue, on cuDNN's graph API
// (the fused-convolution recipe of NVIDIA's MLPerf ResNet-50): forward with the previous BatchNorm's scale, bias and
// ReLU applied to the input and the next BatchNorm's statistics out; data gradient with dReLU and BatchNorm's backward
// weights; weight gradient with the same prologue. Functional ops, no autograd; CUDA builds only.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "ops/conv_prologue.h"
#include "ops/fused_batch_norm.h"

namespace rn50::ops {

// A square 2-D cross-correlation, dilation 1.
struct ConvGeometry {
  int64_t stride = 1, padding = 0;
};

// The input's prologue, relu(x * scale + bias) per input channel (scale, bias float32 [C]); undefined: none. The
// plan may take them rounded to the data's dtype: cuDNN 9's specialised engines for these patterns do (on the H200,
// typed float the forward had only a runtime-compiled engine 3-7x slower, and the weight gradient none). `run`: in
// the convolution, as a pass of its own before a plain one, or the faster of the two (ops/conv_prologue.h).
struct Prologue {
  at::Tensor scale, bias;
  PrologueRun run = PrologueRun::kFused;
  bool defined() const { return scale.defined(); }
};

// y = conv(prologue(x), w), channels-last in x's dtype; sum and sq_sum: float32 [K], y's per-channel sum and sum of
// squares, computed in the convolution's epilogue.
struct ConvStats {
  at::Tensor y, sum, sq_sum;
};

// x [N, C, H, W] and w [K, C, R, S]: channels-last CUDA tensors of one dtype (half or bfloat16).
ConvStats conv_forward_stats(const at::Tensor& x, const at::Tensor& w, ConvGeometry geometry,
                             const Prologue& prologue = {});

// dw [K, C, R, S] (channels-last, x's dtype) of y = conv(prologue(x), w) for the output gradient dy.
at::Tensor conv_backward_filter(const at::Tensor& x, const at::Tensor& dy, at::IntArrayRef w_sizes,
                                ConvGeometry geometry, const Prologue& prologue = {});

// dx [N, C, H, W] = dgrad(dy, w) for an input of x_sizes; with `accumulate` defined (channels-last, that shape),
// dgrad is added into it in place (cuDNN's beta = 1) and it is returned: the two gradients of a block's input.
at::Tensor conv_backward_data(const at::Tensor& dy, const at::Tensor& w, at::IntArrayRef x_sizes, ConvGeometry geometry,
                              const at::Tensor& accumulate = {});

// The BatchNorm that made this convolution's input, as its backward needs it: x the BatchNorm's input (the previous
// convolution's output), its batch mean and inverse standard deviation, and its affine weight and bias (float32 [C]).
struct BnSaved {
  at::Tensor x, mean, invstd, weight, bias;
};

// The data gradient through the convolution and that BatchNorm's ReLU: dz = dgrad(dy, w) * (bn(x) > 0), the gradient
// at the BatchNorm's output before the ReLU, with BatchNorm's backward weights in the epilogue: dweight, dbias and the
// coefficients of its input's gradient, dx = eq_dy * dz + eq_x * x + eq_bias (float32 [C] each).
struct DgradBn {
  at::Tensor dz, dweight, dbias, eq_dy, eq_x, eq_bias;
};
DgradBn conv_backward_data_bn(const at::Tensor& dy, const at::Tensor& w, const BnSaved& bn, ConvGeometry geometry);

// At a block boundary: dz = (dgrad(dy, w) + accumulate) * (bn(bn.x) + residual > 0), the gradient at the previous
// block's output BatchNorm+add before its ReLU (accumulate: the identity's or downsample's gradient of this block's
// input; bn: the previous block's bn3 with its input, the conv3 output; residual: what that block added), with that
// BatchNorm's backward weights in the epilogue. dz is also the previous block's residual gradient.
DgradBn conv_backward_data_add_bn(const at::Tensor& dy, const at::Tensor& w, const at::Tensor& accumulate,
                                  const at::Tensor& residual, const BnSaved& bn, ConvGeometry geometry);

// BatchNorm's training statistics from a convolution's sums over count = N*H*W values: mean, invstd, and the affine
// folded into one scale and shift (x * scale + shift = (x - mean) * invstd * weight + bias); the state's running
// statistics updated in place (unbiased variance, momentum) and num_batches_tracked incremented.
struct BnFinal {
  at::Tensor mean, invstd, scale, shift;
};
BnFinal bn_finalize(const at::Tensor& sum, const at::Tensor& sq_sum, int64_t count, const BatchNormState& bn);

// relu?(x * scale + shift + r): r = residual * rscale + rshift with rscale defined (a downsample's BatchNorm), the
// residual itself where only it is defined, else nothing. x, residual channels-last; scale... float32 [C].
at::Tensor bn_apply(const at::Tensor& x, const at::Tensor& scale, const at::Tensor& shift, bool relu,
                    const at::Tensor& residual = {}, const at::Tensor& rscale = {}, const at::Tensor& rshift = {});

// bn_apply with ReLU, also writing ReLU's mask as one bit an element (relu_bits: uint8 [numel / 8], bit k of byte
// (row * C + c0) / 8 for channel c0 + k, set where y is positive): what the block output's BatchNorm backward reads
// instead of y, a sixteenth of its bytes in half. C a multiple of 8.
struct AppliedRelu {
  at::Tensor y, relu_bits;
};
AppliedRelu bn_apply_relu_bits(const at::Tensor& x, const at::Tensor& scale, const at::Tensor& shift,
                               const at::Tensor& residual = {}, const at::Tensor& rscale = {},
                               const at::Tensor& rshift = {});

// A BatchNorm's input gradient from the data gradient's epilogue: eq_dy * dz + eq_x * x + eq_bias.
at::Tensor dbn_apply(const DgradBn& grad, const at::Tensor& x);

// cuDNN offers no plan for a pattern and shape (every typing tried): the reason names them. Other failures (out of
// memory, CUDA errors) are other exceptions, so that callers fall back only on this one.
class NoPlanError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Why the graph API would not run these ops for such a tensor (empty: it would try): CPU, NCHW, dtype, CPU build.
std::string fused_conv_unsupported_reason(const at::Tensor& x);

// The engine and candidates behind the last plan built on this thread, for logs and the benchmark: e.g.
// "engine 23 (4 candidates, 0.412 ms)" or the reason none was found.
std::string last_plan_description();

// What fusion: conv's plan choices depend on besides the GPU, pattern and shape, for the plan cache's file
// (core/plan_cache.h): this rn50's build, the cuDNN library loaded and the CUDA driver ("" in a CPU-only build).
std::string fused_conv_plan_context();

// The choices PrologueRun::kTimed made (on any thread: each thread chooses for itself) since the last call, one line
// each (pattern, shapes, both times, the one kept; or that the plan cache gave it), for the log; cleared.
std::vector<std::string> take_prologue_choices();

}  // namespace rn50::ops
