// ops/max_pool_kernels.h: rn50's channels-last max-pool kernels, forward (the max and a one-byte position of it in
// its window per output) and backward (a gathering pass that writes each input gradient once): raw pointers, a plan
// (ops/max_pool_geometry.h) and a stream, no ATen.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "ops/max_pool_geometry.h"

namespace rn50::ops::kernels {

// y [n, c, oh, ow] and positions (uint8, the same layout) from x, all channels-last. An output's position is
// (y - y0) * kw + (x - x0) of its max's input element (y, x), (y0, x0) the window's top-left corner with padding
// (oh_index * sh - ph, ow_index * sw - pw). The max and its position follow ATen's max_pool2d: the first of equal
// maxima in row-major order, the last NaN where the window has any; a window of nothing but -inf gives -inf at its
// first element inside the input (as ATen's CPU kernel; ATen's channels-last CUDA kernel gives flat index 0 there).
template <typename T>
void max_pool_forward(const PoolPlan& plan, const T* x, T* y, uint8_t* positions, cudaStream_t stream);

// The BatchNorm (training statistics or running ones) that bn_relu_max_pool_forward applies before pooling: float32 [c]
// each, on the device.
struct PoolNorm {
  const float* weight = nullptr;
  const float* bias = nullptr;
  const float* mean = nullptr;
  const float* invstd = nullptr;
};

// max_pool_forward of relu(batch_norm(x)) without writing that tensor: each element as batch_norm_forward's normalize
// pass computes and rounds it, so y is bit for bit the two ops' output; positions as max_pool_forward's where y > 0,
// kNoGradient elsewhere, so that max_pool_backward of them gives BatchNorm's backward the ReLU-masked gradient; x_at
// (y's shape) the element of x whose normalised value is each output's max, for batch_norm_backward_pooled's sums.
template <typename T>
void bn_relu_max_pool_forward(const PoolPlan& plan, const T* x, const PoolNorm& norm, T* y, uint8_t* positions, T* x_at,
                              cudaStream_t stream);

// dx [n, c, h, w] from dy [n, c, oh, ow] and the forward's positions: each input element gets the sum, in float and
// in row-major order of the outputs (ATen's CUDA kernels' order), of the gradients of the outputs whose max it is;
// every element is written, none is zeroed first, no atomics.
template <typename T>
void max_pool_backward(const PoolPlan& plan, const T* dy, const uint8_t* positions, T* dx, cudaStream_t stream);

}  // namespace rn50::ops::kernels
