// ops/fused_layer_norm.cpp: add_layer_norm's and scaled_residual's dispatch, their autograd functions and the ATen
// ops they fall back to (every build; the kernels sit behind ops/fused_layer_norm_backend.h).
#include "ops/fused_layer_norm.h"

#include <ATen/ATen.h>
#include <c10/core/DeviceType.h>
#include <torch/csrc/autograd/custom_function.h>

#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>

#include "ops/fused_layer_norm_backend.h"

namespace rn50::ops {
namespace {

namespace backend = detail::layer_norm;

std::string sizes_of(const at::Tensor& t) {
  std::ostringstream out;
  out << t.sizes();
  return out.str();
}

void check_layer_norm_args(const at::Tensor& x, const at::Tensor& branch, const at::Tensor& weight,
                           const at::Tensor& bias) {
  if (!x.defined() || x.dim() < 1) throw std::invalid_argument("add_layer_norm: x must be a defined tensor of dim >= 1");
  const int64_t width = x.size(-1);
  for (const at::Tensor* t : {&weight, &bias}) {
    if (!t->defined() || t->numel() != width) {
      throw std::invalid_argument("add_layer_norm: weight and bias need " + std::to_string(width) + " elements, got " +
                                  (t->defined() ? sizes_of(*t) : std::string("none")));
    }
  }
  if (branch.defined() && (branch.sizes() != x.sizes() || branch.device() != x.device())) {
    throw std::invalid_argument("add_layer_norm: the branch must have x's shape and device (x " + sizes_of(x) +
                                ", branch " + sizes_of(branch) + ")");
  }
}

std::optional<at::ScalarType> dtype_of(const at::Tensor& t) {
  return t.defined() ? std::optional<at::ScalarType>(t.scalar_type()) : std::nullopt;
}

bool float_vector_on(const at::Tensor& t, const at::Tensor& x) {
  return t.scalar_type() == at::kFloat && t.device() == x.device() && t.is_contiguous();
}

// ATen's ops, as the models ran them before: the add (type promotion), layer_norm (float32 under autocast), the cast.
AddLayerNormOut aten_add_layer_norm(const at::Tensor& x, const at::Tensor& branch, const at::Tensor& weight,
                                    const at::Tensor& bias, double eps, at::ScalarType out_dtype) {
  AddLayerNormOut out;
  if (branch.defined()) out.sum = x + branch;
  const at::Tensor& s = branch.defined() ? out.sum : x;
  out.y = at::layer_norm(s, {s.size(-1)}, weight, bias, eps);
  if (out.y.scalar_type() != out_dtype) out.y = out.y.to(out_dtype);
  return out;
}

struct LayerNormSettings {
  double eps = 1e-5;
  at::ScalarType out_dtype = at::kFloat;
};

class AddLayerNormFunction : public torch::autograd::Function<AddLayerNormFunction> {
 public:
  // Outputs: {sum, y} with a branch, {y} without.
  static torch::autograd::variable_list forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x,
                                                const c10::optional<at::Tensor>& branch, const at::Tensor& weight,
                                                const at::Tensor& bias, const LayerNormSettings& s) {
    const at::Tensor b = branch.has_value() ? *branch : at::Tensor();
    backend::Forward out = backend::forward(x, b, weight, bias, s.eps, s.out_dtype);
    ctx->save_for_backward({b.defined() ? out.sum : x, weight});
    ctx->saved_data["mean"] = out.mean;
    ctx->saved_data["rstd"] = out.rstd;
    ctx->saved_data["branch_dtype"] = b.defined() ? static_cast<int64_t>(b.scalar_type()) : int64_t{-1};
    ctx->saved_data["y_dtype"] = static_cast<int64_t>(s.out_dtype);
    if (b.defined()) return {out.sum, out.y};
    return {out.y};
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const torch::autograd::variable_list saved = ctx->get_saved_variables();
    const int64_t code = ctx->saved_data["branch_dtype"].toInt();
    const std::optional<at::ScalarType> branch_dtype =
        code >= 0 ? std::optional<at::ScalarType>(static_cast<at::ScalarType>(code)) : std::nullopt;
    const at::Tensor dsum = branch_dtype ? grads[0] : at::Tensor();
    at::Tensor dy = branch_dtype ? grads[1] : grads[0];
    const at::Tensor& s = saved[0];
    if (!dy.defined()) {  // y unused downstream: its gradient is zero
      dy = at::zeros(s.sizes(), s.options().dtype(static_cast<at::ScalarType>(ctx->saved_data["y_dtype"].toInt())));
    }
    backend::Backward g = backend::backward(dy, dsum, s, saved[1], ctx->saved_data["mean"].toTensor(),
                                            ctx->saved_data["rstd"].toTensor(), branch_dtype);
    // One gradient per forward argument: x, branch, weight, bias, and none for the settings.
    return {g.dx, g.dbranch, g.dweight, g.dbias, at::Tensor()};
  }
};

// ATen's ops in torchvision's order: layer_scale * y, then StochasticDepth's product, then the residual add.
at::Tensor aten_scaled_residual(const at::Tensor& x, const at::Tensor& y, const at::Tensor& gamma,
                                const at::Tensor& scale) {
  at::Tensor out = gamma.view({-1, 1, 1}) * y;
  if (scale.defined()) out = out * scale.view({-1, 1, 1, 1});
  return out.add_(x);
}

class ScaledResidualFunction : public torch::autograd::Function<ScaledResidualFunction> {
 public:
  // x, y: [rows, width] views of the channels-last tensors; scale: [N] or undefined.
  static torch::autograd::variable_list forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x,
                                                const at::Tensor& y, const at::Tensor& gamma,
                                                const c10::optional<at::Tensor>& scale, int64_t rows_per_sample) {
    const at::Tensor sc = scale.has_value() ? *scale : at::Tensor();
    ctx->save_for_backward({y, gamma});
    ctx->saved_data["scale"] = sc;
    ctx->saved_data["rows_per_sample"] = rows_per_sample;
    return {backend::scaled_residual_forward(x, y, gamma, sc, rows_per_sample)};
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const torch::autograd::variable_list saved = ctx->get_saved_variables();
    const at::Tensor dout = grads[0].contiguous();
    backend::ScaledResidualBackward g =
        backend::scaled_residual_backward(dout, saved[0], saved[1], ctx->saved_data["scale"].toTensor(),
                                          ctx->saved_data["rows_per_sample"].toInt());
    // x's gradient is dout itself (the add); none for scale (drawn, not learned) and rows_per_sample.
    return {dout, g.dy, g.dgamma, at::Tensor(), at::Tensor()};
  }
};

std::string device_reason(const at::Tensor& x) {
  if (x.device().is_cpu()) return "on the CPU";
  if (!x.is_cuda()) return "on a " + c10::DeviceTypeName(x.device().type(), /*lower_case=*/true) + " device";
  if (!backend::built_with_cuda()) return "this rn50 was built without CUDA";
  return "";
}

}  // namespace

std::string fused_layer_norm_unsupported_reason(const at::Tensor& x, const at::Tensor& branch,
                                                at::ScalarType out_dtype) {
  if (!x.defined() || x.dim() < 1) return "an undefined or 0-dim tensor";
  const std::string device = device_reason(x);
  if (!device.empty()) return device;
  if (x.numel() == 0) return "an empty tensor";
  if (!x.is_contiguous() || (branch.defined() && !branch.is_contiguous())) return "rows that are not contiguous";
  return backend::kernel_unsupported_reason(x.scalar_type(), dtype_of(branch), out_dtype, x.size(-1));
}

AddLayerNormOut add_layer_norm(const at::Tensor& x, const at::Tensor& branch, const at::Tensor& weight,
                               const at::Tensor& bias, double eps, at::ScalarType out_dtype, bool fused) {
  check_layer_norm_args(x, branch, weight, bias);
  if (!fused || !fused_layer_norm_unsupported_reason(x, branch, out_dtype).empty() ||
      !float_vector_on(weight, x) || !float_vector_on(bias, x)) {
    return aten_add_layer_norm(x, branch, weight, bias, eps, out_dtype);
  }
  LayerNormSettings s;
  s.eps = eps;
  s.out_dtype = out_dtype;
  c10::optional<at::Tensor> b;
  if (branch.defined()) b = branch;
  const torch::autograd::variable_list out = AddLayerNormFunction::apply(x, b, weight, bias, s);
  if (branch.defined()) return {out[0], out[1]};
  return {at::Tensor(), out[0]};
}

at::Tensor scaled_residual(const at::Tensor& x, const at::Tensor& y, const at::Tensor& gamma, const at::Tensor& scale,
                           bool fused) {
  if (!x.defined() || x.dim() != 4 || !y.defined() || y.sizes() != x.sizes()) {
    throw std::invalid_argument("scaled_residual: x and y must be [N, C, H, W] of one shape");
  }
  if (!gamma.defined() || gamma.numel() != x.size(1) || (scale.defined() && scale.numel() != x.size(0))) {
    throw std::invalid_argument("scaled_residual: gamma needs C, scale N elements (x " + sizes_of(x) + ")");
  }
  // The kernels read both as rows of C: x channels-last, y the NCHW view of an NHWC tensor, both float32 x.
  const at::Tensor y_rows = y.permute({0, 2, 3, 1});
  const bool rows_ok = x.is_contiguous(at::MemoryFormat::ChannelsLast) && y_rows.is_contiguous() && x.numel() > 0;
  const bool kernel_ok = fused && rows_ok && device_reason(x).empty() && x.scalar_type() == at::kFloat &&
                         float_vector_on(gamma, x) && (!scale.defined() || float_vector_on(scale, x)) &&
                         backend::kernel_unsupported_reason(at::kFloat, std::nullopt, at::kFloat, x.size(1)).empty();
  if (!kernel_ok) return aten_scaled_residual(x, y, gamma.reshape({-1}), scale);
  const int64_t n = x.size(0), c = x.size(1), h = x.size(2), w = x.size(3);
  const at::Tensor x_rows = x.permute({0, 2, 3, 1}).view({n * h * w, c});
  c10::optional<at::Tensor> sc;
  if (scale.defined()) sc = scale.reshape({-1});
  const at::Tensor out = ScaledResidualFunction::apply(x_rows, y_rows.view({n * h * w, c}), gamma.reshape({-1}), sc,
                                                       h * w)[0];
  return out.view({n, h, w, c}).permute({0, 3, 1, 2});
}

}  // namespace rn50::ops
