// ops/max_pool_backend.h: what the max-pool dispatch (ops/max_pool.cpp) asks of the kernels' glue, with no CUDA types,
// so that every build compiles the dispatch: CUDA builds link ops/max_pool_cuda.cpp, CPU builds ops/max_pool_none.cpp.
#pragma once

#include <ATen/core/Tensor.h>

#include "ops/max_pool.h"
#include "ops/max_pool_geometry.h"

namespace rn50::ops::detail {

// y and positions of x, a channels-last CUDA tensor (half, bfloat16 or float32) of `shape`, which
// kernels::pool_unsupported_reason takes; on the current stream, outputs from the caching allocator.
MaxPoolForward max_pool_forward(const at::Tensor& x, const kernels::PoolShape& shape);

// The same for relu(batch_norm(x)) with the given statistics (float32 [C] each, on x's device): positions are
// kernels::kNoGradient where the max is not above zero; x_at: x at each output's max.
MaxPoolForward bn_relu_max_pool_forward(const at::Tensor& x, const kernels::PoolShape& shape, const at::Tensor& weight,
                                        const at::Tensor& bias, const at::Tensor& mean, const at::Tensor& invstd);

// dx (channels-last, x's dtype) from dy (any layout, the output's shape and dtype) and the forward's positions.
at::Tensor max_pool_backward(const at::Tensor& dy, const at::Tensor& positions, const kernels::PoolShape& shape);

}  // namespace rn50::ops::detail
