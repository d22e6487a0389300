// ops/weight_cast_cuda.cpp: the multi-tensor cast's glue (CUDA builds only): tensors to pointer lists, launches on the
// current stream, so that a CUDA graph can capture them.
#include <ATen/ATen.h>
#include <c10/core/DeviceGuard.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "ops/current_stream.h"
#include "ops/weight_cast_backend.h"
#include "ops/weight_cast_kernels.h"

namespace rn50::ops::detail {
namespace {

kernels::CastType cast_type(at::ScalarType t) {
  switch (t) {
    case at::kFloat:
      return kernels::CastType::kFloat;
    case at::kHalf:
      return kernels::CastType::kHalf;
    case at::kBFloat16:
      return kernels::CastType::kBFloat16;
    default:
      throw std::invalid_argument("rn50's multi-tensor cast: dtype " + std::string(c10::toString(t)));
  }
}

}  // namespace

void cast_many(const std::vector<at::Tensor>& src, const std::vector<at::Tensor>& dst) {
  if (src.size() != dst.size()) throw std::invalid_argument("rn50's multi-tensor cast: as many outputs as inputs");
  if (src.empty()) return;
  const at::ScalarType from = src.front().scalar_type(), to = dst.front().scalar_type();
  std::vector<kernels::CastItem> items;
  items.reserve(src.size());
  for (size_t i = 0; i < src.size(); ++i) {
    const at::Tensor &s = src[i], &d = dst[i];
    if (!s.is_cuda() || s.device() != src.front().device() || d.device() != s.device()) {
      throw std::invalid_argument("rn50's multi-tensor cast: tensors on one CUDA device");
    }
    if (s.scalar_type() != from || d.scalar_type() != to || !same_dense_layout(s, d)) {
      throw std::invalid_argument("rn50's multi-tensor cast: pairs of one dtype each, dense, laid out alike");
    }
    if (s.numel() > 0) items.push_back({s.data_ptr(), d.data_ptr(), s.numel()});
  }
  const c10::DeviceGuard guard(src.front().device());
  const cudaStream_t stream = current_stream(static_cast<int>(src.front().get_device()));
  for (const kernels::CastList& list : kernels::make_cast_lists(items)) {
    kernels::cast_many(list, cast_type(from), cast_type(to), stream);
  }
}

}  // namespace rn50::ops::detail
