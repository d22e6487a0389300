// ops/max_pool_none.cpp: the max-pool kernels' glue in CPU-only builds: never reached (the dispatch sends CPU tensors
// to ATen's max_pool2d).
#include <stdexcept>

#include "ops/max_pool_backend.h"

namespace rn50::ops::detail {

MaxPoolForward max_pool_forward(const at::Tensor&, const kernels::PoolShape&) {
  throw std::logic_error("rn50's max_pool2d: this rn50 was built without CUDA");
}

MaxPoolForward bn_relu_max_pool_forward(const at::Tensor&, const kernels::PoolShape&, const at::Tensor&,
                                        const at::Tensor&, const at::Tensor&, const at::Tensor&) {
  throw std::logic_error("rn50's bn_relu_max_pool2d: this rn50 was built without CUDA");
}

at::Tensor max_pool_backward(const at::Tensor&, const at::Tensor&, const kernels::PoolShape&) {
  throw std::logic_error("rn50's max_pool2d: this rn50 was built without CUDA");
}

}  // namespace rn50::ops::detail
