// ops/fused_batch_norm_none.cpp: the fused BatchNorm's CUDA side in CPU-only builds: never reached (the dispatch sends
// CPU tensors to ATen's ops), and a reason to log.
#include <stdexcept>
#include <string>

#include "ops/fused_batch_norm_backend.h"

namespace rn50::ops::detail {

bool built_with_cuda() { return false; }

ForwardOut forward(const ForwardIn&) {
  throw std::logic_error("fused batch_norm_act: this rn50 was built without CUDA");
}

BackwardOut backward(const BackwardIn&) {
  throw std::logic_error("fused batch_norm_act: this rn50 was built without CUDA");
}

std::string cudnn_unsupported_reason(const at::Tensor&, bool, bool) { return "this rn50 was built without CUDA"; }

}  // namespace rn50::ops::detail
