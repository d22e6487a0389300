// ops/fused_layer_norm_none.cpp: the row kernels' CUDA side in CPU-only builds: never reached (the dispatch sends CPU
// tensors to ATen's ops), and a reason to log.
#include <stdexcept>
#include <string>

#include "ops/fused_layer_norm_backend.h"

namespace rn50::ops::detail::layer_norm {
namespace {
constexpr const char* kNoCuda = "this rn50 was built without CUDA";
}  // namespace

bool built_with_cuda() { return false; }

std::string kernel_unsupported_reason(at::ScalarType, std::optional<at::ScalarType>, at::ScalarType, int64_t) {
  return kNoCuda;
}

Forward forward(const at::Tensor&, const at::Tensor&, const at::Tensor&, const at::Tensor&, double, at::ScalarType) {
  throw std::logic_error(std::string("fused add_layer_norm: ") + kNoCuda);
}

Backward backward(const at::Tensor&, const at::Tensor&, const at::Tensor&, const at::Tensor&, const at::Tensor&,
                  const at::Tensor&, std::optional<at::ScalarType>) {
  throw std::logic_error(std::string("fused add_layer_norm: ") + kNoCuda);
}

at::Tensor scaled_residual_forward(const at::Tensor&, const at::Tensor&, const at::Tensor&, const at::Tensor&, int64_t) {
  throw std::logic_error(std::string("fused scaled_residual: ") + kNoCuda);
}

ScaledResidualBackward scaled_residual_backward(const at::Tensor&, const at::Tensor&, const at::Tensor&,
                                                const at::Tensor&, int64_t) {
  throw std::logic_error(std::string("fused scaled_residual: ") + kNoCuda);
}

}  // namespace rn50::ops::detail::layer_norm
