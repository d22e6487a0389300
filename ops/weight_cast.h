// ops/weight_cast.h: float16 (or bfloat16) copies of many float32 weights made in one launch, differentiable, whose
// gradients come back as float32 in one launch: for the fused bottlenecks, which otherwise cast each weight, and each
// weight's gradient, with a kernel of its own (106 small kernels a ResNet-50 step).
#pragma once

#include <ATen/core/Tensor.h>

#include <string>
#include <vector>

namespace rn50::ops {

// Copies of `weights` in `dtype` (float16 or bfloat16), each with its weight's strides, as one autograd op: the
// backward returns every gradient as float32 with its weight's strides. The values are those of w.to(dtype) and
// grad.to(float32), bit for bit. The backward runs once every copy's gradient has arrived (or is known never to), so
// a hook on a weight's gradient fires at the end of the backward rather than as its layer finishes: data parallel's
// buckets would lose their overlap with the backward. On a CUDA device all dense tensors go through
// ops/weight_cast_kernels.h, up to 64 a launch; anything else (the CPU, a weight with gaps) is cast one by one.
// Throws std::invalid_argument for a weight that is not float32, a dtype other than the two, or weights on different
// devices.
std::vector<at::Tensor> cast_weights(const std::vector<at::Tensor>& weights, at::ScalarType dtype);

// Why cast_weights would refuse these arguments; empty when it takes them.
std::string cast_weights_unsupported_reason(const std::vector<at::Tensor>& weights, at::ScalarType dtype);

}  // namespace rn50::ops
