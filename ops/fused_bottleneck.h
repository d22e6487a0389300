// ops/fused_bottleneck.h: ResNet's bottleneck block (1x1, 3x3 with the stride, 1x1, optional downsample) in training
// as one autograd op built on the fused convolutions (ops/fused_conv.h): each BatchNorm's statistics come out of its
// convolution's epilogue, its scale, bias and ReLU ride in the next convolution's prologue, and its backward in the
// next convolution's data gradient; only the block's output is normalised in a pass of its own.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <string>

#include "ops/conv_prologue.h"
#include "ops/fused_batch_norm.h"

namespace rn50::ops {

// A boundary between two fused bottlenecks, block k's output and block k+1's input, through which bn3's backward
// moves into the next block's input gradient: block k's forward leaves bn3's input, statistics and residual here;
// block k+1's backward computes bn3's backward weights and the masked gradient inside that input gradient's graph
// (ops/fused_conv.h's conv_backward_data_add_bn) and leaves them here; block k's backward then skips bn3's reduction.
// Owned by the model, one per boundary, reused every step, and it must outlive the backward of every forward that
// used it; either block falls back to the separate passes when the other did not take part. x's gradient that block
// k+1 returns is block k's masked gradient, not the true one: right for block k, which masks first, and the reason a
// block output with another consumer must not be linked. A training forward without a backward keeps bn3's input and
// the residual referenced until the block's next forward. Opaque outside ops/fused_bottleneck.cpp.
struct BoundaryLink;
std::shared_ptr<BoundaryLink> make_boundary_link();
// Disarms it (the model, at each forward of the block before it: only a fused forward arms it again).
void reset_boundary_link(BoundaryLink* link);
// Since the process started (for tests and logs): boundaries whose graph block k+1's backward ran (filled), and of
// those, how many block k's backward took instead of its own bn3 backward (taken).
struct BoundaryCounts {
  int64_t filled = 0, taken = 0;
};
BoundaryCounts fused_boundaries_run();

// One block's parameters as torchvision holds them: float32 convolution weights [K, C, R, S] (wd undefined without a
// downsample) and the BatchNorms after conv1, conv2, conv3 and the downsample's convolution; the 3x3 convolution's
// stride, groups (ResNeXt's cardinality) and dilation. wgrad_stream: the backward pass's weight gradients on a
// second stream beside its data gradients (ops/side_stream.h); the same kernels and results either way. prologue:
// where conv2's and conv3's scale-bias-ReLU prologues run, forward and in their weight gradients (ops/conv_prologue.h).
struct BottleneckParams {
  at::Tensor w1, w2, w3, wd;
  BatchNormState bn1, bn2, bn3, bnd;
  int64_t stride = 1;
  int64_t groups = 1;
  int64_t dilation = 1;
  bool wgrad_stream = true;
  PrologueRun prologue = PrologueRun::kTimed;
  std::string backward_range{};  // profilers' name for the block's backward (cuda/nvtx.h), e.g. "layer2.0 backward"
  // The boundaries at this block's input (the previous block's output link) and output; null: none.
  std::shared_ptr<BoundaryLink> in_link{}, out_link{};
};

// relu(bn3(conv3(relu(bn2(conv2(relu(bn1(conv1(x)))))))) + identity), identity = bnd(convd(x)) or x, with batch
// statistics and the running statistics updated as torch::nn::BatchNorm2d does. x: a channels-last float16 CUDA
// tensor. The weights are cast to x's dtype (autograd takes the gradients back to float32). Gradients flow to x,
// every weight and every BatchNorm's weight and bias. Throws where bottleneck_unsupported_reason is not empty, and
// std::runtime_error where cuDNN offers no plan for a shape.
at::Tensor bottleneck_forward(const at::Tensor& x, const BottleneckParams& p);

// Why bottleneck_forward would not run for such an input (empty: it would try): a grouped or dilated 3x3
// convolution, the CPU, a dtype other than float16 (cuDNN 9's fused data- and weight-gradient patterns have no
// bfloat16 engines; measured on an H200), NCHW, any of the block's BatchNorms in evaluation or without running
// statistics.
std::string bottleneck_unsupported_reason(const at::Tensor& x, const BottleneckParams& p);

// The part of it that the block's geometry alone decides (groups, dilation): what holds for every input.
std::string bottleneck_geometry_unsupported_reason(const BottleneckParams& p);

// The part of it that the input alone decides (device, dtype, layout, the build): what holds for a whole run.
std::string bottleneck_input_unsupported_reason(const at::Tensor& x);

// Builds every plan the block needs for this input (forward and backward) by running it once on copies: no
// parameter, gradient or running statistic changes. Returns cuDNN's reason when it offers no plan for a pattern
// (ops::NoPlanError; empty: all built); other errors (out of memory, CUDA) propagate.
std::string prepare_bottleneck(const at::Tensor& x, const BottleneckParams& p);

}  // namespace rn50::ops
