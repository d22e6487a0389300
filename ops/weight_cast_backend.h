// ops/weight_cast_backend.h: what ops/weight_cast.cpp asks of the multi-tensor cast's glue, with no CUDA types, so
// that every build compiles the dispatch: CUDA builds link ops/weight_cast_cuda.cpp, CPU builds
// ops/weight_cast_none.cpp.
#pragma once

#include <ATen/core/Tensor.h>

#include <vector>

namespace rn50::ops::detail {

// Whether a and b are each one dense block of memory holding their elements in the same order: the same sizes, and
// the same strides wherever a size is above 1 (a 1x1 convolution's weight has several valid strides for its unit
// dimensions, and a gradient need not pick the weight's).
inline bool same_dense_layout(const at::Tensor& a, const at::Tensor& b) {
  if (a.sizes() != b.sizes() || !a.is_non_overlapping_and_dense() || !b.is_non_overlapping_and_dense()) return false;
  for (int64_t d = 0; d < a.dim(); ++d) {
    if (a.size(d) > 1 && a.stride(d) != b.stride(d)) return false;
  }
  return true;
}

// dst[i] = src[i] converted, for CUDA tensors on one device, each pair with same_dense_layout, float32 to float16 or
// bfloat16 or back; on the current stream.
void cast_many(const std::vector<at::Tensor>& src, const std::vector<at::Tensor>& dst);

}  // namespace rn50::ops::detail
