// ops/weight_cast_none.cpp: the multi-tensor cast's glue in CPU-only builds: never reached (ops/weight_cast.cpp casts
// CPU tensors one by one).
#include <stdexcept>

#include "ops/weight_cast_backend.h"

namespace rn50::ops::detail {

void cast_many(const std::vector<at::Tensor>&, const std::vector<at::Tensor>&) {
  throw std::logic_error("rn50's multi-tensor cast: this rn50 was built without CUDA");
}

}  // namespace rn50::ops::detail
