// ops/max_pool.h: 2-D max pooling as one autograd op: rn50's channels-last kernels on the GPU, which keep one byte
// per output for the backward instead of ATen's eight, and ATen's max_pool2d everywhere else; and ResNet's stem
// BatchNorm+ReLU+max-pool as one op that never writes the normalised tensor.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>

#include "ops/bn_kernels.h"
#include "ops/fused_batch_norm.h"
#include "ops/max_pool_geometry.h"

namespace rn50::ops {

// torch's max_pool2d(kernel_size, stride, padding) with dilation 1 and ceil_mode false.
struct MaxPool2d {
  int64_t kernel_h = 1, kernel_w = 1, stride_h = 1, stride_w = 1, pad_h = 0, pad_w = 0;
};

// ResNet's stem: 3x3, stride 2, padding 1.
inline constexpr MaxPool2d kStemMaxPool{3, 3, 2, 2, 1, 1};

// Why max_pool2d would run ATen's op for such an x (empty: rn50's kernels), e.g. "on the CPU", "NCHW layout",
// "dtype Double", "a window of more than 256 elements (positions are one byte)".
std::string max_pool_unsupported_reason(const at::Tensor& x, const MaxPool2d& pool);

// "rn50" or "ATen (<why>)": for the model's start-up line.
std::string describe_max_pool(const at::Tensor& x, const MaxPool2d& pool);

// torch's max_pool2d(x, kernel, stride, padding) for a 4-D x: rn50's kernels where max_pool_unsupported_reason is
// empty (channels-last CUDA tensors in half, bfloat16 or float32), ATen's op otherwise, which also raises torch's
// errors for invalid windows. Both give the same values and indices (rn50's ties and NaNs are ATen's; a window of
// nothing but -inf takes its first element inside the input, as ATen's CPU kernel does) and the same gradients
// (summed in float in ATen's order). rn50's op keeps only the uint8 positions for its backward, and gradients
// through it are not differentiable again.
at::Tensor max_pool2d(const at::Tensor& x, const MaxPool2d& pool);

// max_pool2d(batch_norm_act(x, bn, {}, relu: true, kernels), pool) in training on rn50's kernels, as three passes
// forward instead of four: the batch statistics, then the pool normalising each element as it reads it (the
// normalised tensor, the size of x, is neither written nor kept for the backward); backward rn50's BatchNorm passes,
// each gathering its gradient from the pool's as it reads it (only where ReLU passes one). Values, gradients and
// running statistics are bit for bit those of the two ops on rn50's kernels (BnKernels::kOwn); with kAuto the ops
// apart would run cuDNN's BatchNorm+ReLU, equal within rounding. Runs the two ops where
// bn_relu_max_pool_unsupported_reason is not empty (the CPU, evaluation, bn_kernels other than auto and rn50, ...).
// Gradients through it are not differentiable again.
at::Tensor bn_relu_max_pool2d(const at::Tensor& x, const BatchNormState& bn, const MaxPool2d& pool,
                              BnKernels kernels = BnKernels::kAuto);

// Why bn_relu_max_pool2d would run the two ops apart (empty: fused), e.g. "evaluation", "on the CPU".
std::string bn_relu_max_pool_unsupported_reason(const at::Tensor& x, const BatchNormState& bn, const MaxPool2d& pool,
                                                BnKernels kernels = BnKernels::kAuto);

// The forward alone on rn50's kernels, outside autograd: y and `positions`, uint8 [N, C, OH, OW] channels-last, each
// output's max's place in its window, (row - row0) * kernel_w + (col - col0) with (row0, col0) the window's top-left
// corner, padding included. For tests and benchmarks; throws std::invalid_argument where the kernels do not take x.
struct MaxPoolForward {
  at::Tensor y, positions;
  at::Tensor x_at;  // bn_relu_max_pool's alone: x at each output's max (y's shape and dtype)
};
MaxPoolForward max_pool2d_positions(const at::Tensor& x, const MaxPool2d& pool);

// The kernels' description of pooling a 4-D x with `pool` (ops/max_pool_geometry.h), for tests and benchmarks that
// launch them directly.
kernels::PoolShape max_pool_shape(const at::Tensor& x, const MaxPool2d& pool);

}  // namespace rn50::ops
