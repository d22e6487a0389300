// ops/fused_batch_norm.cpp: batch_norm_act's dispatch, its autograd function and the ATen path it falls back to
// (every build; the fused kernels sit behind ops/fused_batch_norm_backend.h).
#include "ops/fused_batch_norm.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <c10/core/DeviceType.h>
#include <c10/util/Optional.h>
#include <torch/csrc/autograd/custom_function.h>

#include <sstream>
#include <stdexcept>
#include <string>

#include "ops/fused_batch_norm_backend.h"

namespace rn50::ops {
namespace {

constexpr auto kChannelsLast = at::MemoryFormat::ChannelsLast;

std::string sizes_of(const at::Tensor& t) {
  std::ostringstream out;
  out << t.sizes();
  return out.str();
}

// What the model ran before: batch_norm, then add_ and relu_ in place on its output (BatchNorm's backward does not
// read its output, so the in-place ops are safe, and the peak memory is the unfused one). Like torch::nn::BatchNorm2d,
// without running statistics it normalises with the batch's.
at::Tensor aten_path(const at::Tensor& x, const BatchNormState& bn, const at::Tensor& residual, Activation act) {
  const bool batch_stats = bn.training || !bn.running_mean.defined();
  at::Tensor y = at::batch_norm(x, bn.weight, bn.bias, bn.running_mean, bn.running_var, batch_stats, bn.momentum,
                                bn.eps, at::globalContext().userEnabledCuDNN());
  if (residual.defined()) y.add_(residual);
  if (act == Activation::kRelu) y.relu_();
  if (act == Activation::kSilu) y = at::silu(y);  // not in place: SiLU's backward reads its input
  count_batch_norm_step(bn);
  return y;
}

// What the autograd function needs besides its differentiable inputs. The running statistics travel here, unseen by
// autograd: they are buffers the forward updates in place, with no gradient.
struct Settings {
  at::Tensor running_mean, running_var;
  double momentum = 0.1, eps = 1e-5;
  bool training = true, relu = true, silu = false;
  BnKernels kernels = BnKernels::kAuto;
};

class FusedBatchNormFunction : public torch::autograd::Function<FusedBatchNormFunction> {
 public:
  static torch::autograd::variable_list forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x,
                                                const at::Tensor& weight, const at::Tensor& bias,
                                                const c10::optional<at::Tensor>& residual, const Settings& s) {
    detail::ForwardIn in;
    in.x = x;
    in.residual = residual.has_value() ? *residual : at::Tensor();
    in.weight = weight;
    in.bias = bias;
    in.running_mean = s.running_mean;
    in.running_var = s.running_var;
    in.momentum = s.momentum;
    in.eps = s.eps;
    in.training = s.training;
    in.relu = s.relu;
    in.silu = s.silu;
    in.kernels = s.kernels;
    in.relu_bits = s.relu && s.training && residual.has_value();  // the backward's reduction reads them, not y
    detail::ForwardOut out = detail::forward(in);
    // y only for the ReLU's mask: without ReLU nothing is kept that the unfused path would not keep. (Kept with the
    // bits: a misaligned dy makes the backward use it.)
    ctx->save_for_backward({x, s.relu ? out.y : at::Tensor(), weight, bias});
    ctx->saved_data["relu_bits"] = out.relu_bits;
    ctx->saved_data["mean"] = out.mean;
    ctx->saved_data["invstd"] = out.invstd;
    ctx->saved_data["reserve"] = out.reserve;
    ctx->saved_data["ran"] = static_cast<int64_t>(out.ran);
    ctx->saved_data["has_residual"] = residual.has_value();
    ctx->saved_data["relu"] = s.relu;
    ctx->saved_data["silu"] = s.silu;
    ctx->saved_data["training"] = s.training;
    ctx->saved_data["eps"] = s.eps;
    ctx->saved_data["kernels"] = static_cast<int64_t>(s.kernels);
    return {out.y};
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad_outputs) {
    const torch::autograd::variable_list saved = ctx->get_saved_variables();
    detail::BackwardIn in;
    in.dy = grad_outputs[0];
    in.x = saved[0];
    in.y = saved[1];
    in.weight = saved[2];
    in.bias = saved[3];
    in.mean = ctx->saved_data["mean"].toTensor();
    in.invstd = ctx->saved_data["invstd"].toTensor();
    in.reserve = ctx->saved_data["reserve"].toTensor();
    in.ran = static_cast<detail::Ran>(ctx->saved_data["ran"].toInt());
    in.has_residual = ctx->saved_data["has_residual"].toBool();
    in.relu = ctx->saved_data["relu"].toBool();
    in.silu = ctx->saved_data["silu"].toBool();
    in.training = ctx->saved_data["training"].toBool();
    in.eps = ctx->saved_data["eps"].toDouble();
    in.kernels = static_cast<BnKernels>(ctx->saved_data["kernels"].toInt());
    in.relu_bits = ctx->saved_data["relu_bits"].toTensor();
    detail::BackwardOut g = detail::backward(in);
    // One gradient per forward argument: x, weight, bias, residual, and none for the settings.
    return {g.dx, g.dweight, g.dbias, g.dresidual, at::Tensor()};
  }
};

}  // namespace

// ATen's own messages for these mistakes are long and unclear.
void check_batch_norm_args(const at::Tensor& x, const BatchNormState& bn, const at::Tensor& residual) {
  if (!x.defined()) throw std::invalid_argument("batch_norm_act: x is undefined");
  if (x.dim() != 4) {
    throw std::invalid_argument("batch_norm_act: expected a 4-D input [N, C, H, W], got " + sizes_of(x));
  }
  const int64_t channels = x.size(1);
  for (const at::Tensor* t : {&bn.weight, &bn.bias, &bn.running_mean, &bn.running_var}) {
    if (t->defined() && t->numel() != channels) {
      throw std::invalid_argument("batch_norm_act: a BatchNorm tensor of size " + sizes_of(*t) + " for " +
                                  std::to_string(channels) + " channels");
    }
  }
  if (residual.defined() &&
      (residual.sizes() != x.sizes() || residual.scalar_type() != x.scalar_type() || residual.device() != x.device())) {
    throw std::invalid_argument("batch_norm_act: the residual must have x's shape, dtype and device (x " + sizes_of(x) +
                                ", residual " + sizes_of(residual) + ")");
  }
  if (bn.training && x.numel() / std::max<int64_t>(channels, 1) == 1) {
    throw std::invalid_argument("batch_norm_act: training needs more than one value per channel, got input of size " +
                                sizes_of(x));
  }
}

std::string batch_norm_state_unsupported_reason(const at::Tensor& x, const BatchNormState& bn) {
  if (!bn.weight.defined() || !bn.bias.defined()) return "no affine weight and bias";
  if (!bn.running_mean.defined() || !bn.running_var.defined()) return "no running statistics";
  for (const at::Tensor* t : {&bn.weight, &bn.bias, &bn.running_mean, &bn.running_var}) {
    if (t->scalar_type() != at::kFloat || t->device() != x.device() || !t->is_contiguous()) {
      return "BatchNorm tensors that are not contiguous float32 on x's device";
    }
  }
  return "";
}

void count_batch_norm_step(const BatchNormState& bn) {
  if (bn.training && bn.num_batches_tracked.defined()) {
    at::NoGradGuard no_grad;
    bn.num_batches_tracked.add_(1);
  }
}

const char* to_string(BnKernels kernels) {
  switch (kernels) {
    case BnKernels::kAuto:
      return "auto";
    case BnKernels::kCudnn:
      return "cudnn";
    case BnKernels::kOwn:
      return "rn50";
    case BnKernels::kAten:
      return "aten";
  }
  return "?";
}

std::string fused_unsupported_reason(const at::Tensor& x) {
  if (!x.defined()) return "an undefined tensor";
  if (x.device().is_cpu()) return "on the CPU";
  if (!x.is_cuda()) return "on a " + c10::DeviceTypeName(x.device().type(), /*lower_case=*/true) + " device";
  if (!detail::built_with_cuda()) return "this rn50 was built without CUDA";
  if (x.dim() != 4) return "not a 4-D tensor";
  const auto dtype = x.scalar_type();
  if (dtype != at::kFloat && dtype != at::kHalf && dtype != at::kBFloat16) {
    return std::string("dtype ") + c10::toString(dtype);
  }
  if (!x.is_contiguous(kChannelsLast))
    return x.is_contiguous() ? "NCHW layout" : "neither channels-last nor NCHW dense";
  if (x.numel() == 0) return "an empty tensor";
  return "";
}

std::string cudnn_unsupported_reason(const at::Tensor& x, bool residual, bool relu) {
  const std::string why = fused_unsupported_reason(x);
  if (!why.empty()) return why;
  return detail::cudnn_unsupported_reason(x, residual, relu);
}

std::string describe_kernels(const at::Tensor& x, bool residual, Activation activation, BnKernels kernels,
                             bool training) {
  if (activation != Activation::kSilu) return describe_kernels(x, residual, activation == Activation::kRelu, kernels, training);
  if (kernels == BnKernels::kAten) return "ATen (asked for)";
  const std::string why = fused_unsupported_reason(x);
  if (!why.empty()) return "ATen (" + why + ")";
  return kernels == BnKernels::kCudnn ? "none (cuDNN: its fused BatchNorm takes ReLU alone)" : "rn50";
}

std::string describe_kernels(const at::Tensor& x, bool residual, bool relu, BnKernels kernels, bool training) {
  if (kernels == BnKernels::kAten) return "ATen (asked for)";
  const std::string why = fused_unsupported_reason(x);
  if (!why.empty()) return "ATen (" + why + ")";
  if (!training || kernels == BnKernels::kOwn) return "rn50";
  if (kernels == BnKernels::kAuto && !detail::auto_prefers_cudnn(residual, relu)) return "rn50";
  const std::string cudnn = detail::cudnn_unsupported_reason(x, residual, relu);
  if (kernels == BnKernels::kCudnn) return cudnn.empty() ? "cuDNN" : "none (cuDNN: " + cudnn + ")";
  return cudnn.empty() ? "cuDNN" : "rn50 (cuDNN: " + cudnn + ")";
}

at::Tensor batch_norm_act(const at::Tensor& x, const BatchNormState& bn, const at::Tensor& residual, bool relu,
                          BnKernels kernels) {
  return batch_norm_act(x, bn, residual, relu ? Activation::kRelu : Activation::kNone, kernels);
}

at::Tensor batch_norm_act(const at::Tensor& x, const BatchNormState& bn, const at::Tensor& residual,
                          Activation activation, BnKernels kernels) {
  check_batch_norm_args(x, bn, residual);
  if (activation == Activation::kSilu && residual.defined()) {
    throw std::invalid_argument("batch_norm_act: SiLU with a residual add is not implemented");
  }
  if (activation == Activation::kSilu && kernels == BnKernels::kCudnn) {
    throw std::invalid_argument("batch_norm_act: cuDNN's fused BatchNorm takes ReLU alone, not SiLU");
  }
  if (kernels == BnKernels::kAten || !fused_unsupported_reason(x).empty() || !batch_norm_state_unsupported_reason(x, bn).empty()) {
    return aten_path(x, bn, residual, activation);
  }
  const bool relu = activation == Activation::kRelu;
  Settings s;
  s.running_mean = bn.running_mean;
  s.running_var = bn.running_var;
  s.momentum = bn.momentum;
  s.eps = bn.eps;
  s.training = bn.training;
  s.relu = relu;
  s.silu = activation == Activation::kSilu;
  s.kernels = kernels;
  c10::optional<at::Tensor> r;
  if (residual.defined()) r = residual.is_contiguous(kChannelsLast) ? residual : residual.contiguous(kChannelsLast);
  at::Tensor y = FusedBatchNormFunction::apply(x, bn.weight, bn.bias, r, s)[0];
  count_batch_norm_step(bn);
  return y;
}

}  // namespace rn50::ops
