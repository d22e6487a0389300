// ops/fused_conv_none.cpp: the fused convolutions in CPU-only builds: every op refuses with the reason, which the
// start-up table names before the model runs fusion: bn's path instead.
#include <stdexcept>
#include <string>
#include <vector>

#include "ops/fused_conv.h"

namespace rn50::ops {
namespace {

[[noreturn]] void refuse() { throw std::invalid_argument("fused conv: this rn50 was built without CUDA"); }

}  // namespace

ConvStats conv_forward_stats(const at::Tensor&, const at::Tensor&, ConvGeometry, const Prologue&) { refuse(); }
at::Tensor conv_backward_filter(const at::Tensor&, const at::Tensor&, at::IntArrayRef, ConvGeometry, const Prologue&) {
  refuse();
}
at::Tensor conv_backward_data(const at::Tensor&, const at::Tensor&, at::IntArrayRef, ConvGeometry, const at::Tensor&) {
  refuse();
}
DgradBn conv_backward_data_bn(const at::Tensor&, const at::Tensor&, const BnSaved&, ConvGeometry) { refuse(); }
DgradBn conv_backward_data_add_bn(const at::Tensor&, const at::Tensor&, const at::Tensor&, const at::Tensor&,
                                  const BnSaved&, ConvGeometry) {
  refuse();
}
BnFinal bn_finalize(const at::Tensor&, const at::Tensor&, int64_t, const BatchNormState&) { refuse(); }
at::Tensor bn_apply(const at::Tensor&, const at::Tensor&, const at::Tensor&, bool, const at::Tensor&, const at::Tensor&,
                    const at::Tensor&) {
  refuse();
}
AppliedRelu bn_apply_relu_bits(const at::Tensor&, const at::Tensor&, const at::Tensor&, const at::Tensor&,
                               const at::Tensor&, const at::Tensor&) {
  refuse();
}
at::Tensor dbn_apply(const DgradBn&, const at::Tensor&) { refuse(); }

std::string fused_conv_unsupported_reason(const at::Tensor& x) {
  return x.is_cuda() ? "this rn50 was built without CUDA" : "on the CPU";
}
std::string last_plan_description() { return ""; }
std::string fused_conv_plan_context() { return ""; }
std::vector<std::string> take_prologue_choices() { return {}; }

}  // namespace rn50::ops
