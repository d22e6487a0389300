// trainer/sgd.cpp: the momentum SGD update: one fused kernel on a GPU, a sequence of in-place ATen ops elsewhere.
#include "trainer/sgd.h"

#include <ATen/ATen.h>
#include <torch/nn/module.h>
#include <torch/utils.h>

#include "cuda/device_ops.h"

namespace rn50::trainer {
namespace {

OptimizerOptions sgd_options(double momentum, double weight_decay, bool decay_bn_and_bias, bool fused) {
  OptimizerOptions o;
  o.momentum = momentum;
  o.weight_decay = weight_decay;
  o.decay_norms_and_biases = decay_bn_and_bias;
  o.fused = fused;
  return o;
}

}  // namespace

Sgd::Sgd(torch::nn::Module& model, double momentum, double weight_decay, bool decay_bn_and_bias, bool fused)
    : Sgd(model, sgd_options(momentum, weight_decay, decay_bn_and_bias, fused)) {}

Sgd::Sgd(torch::nn::Module& model, const OptimizerOptions& options)
    : Optimizer(model, options), momentum_(options.momentum) {
  torch::NoGradGuard no_grad;
  // Zero momentum makes the first update buf = grad, as PyTorch's lazy initialisation does.
  for (const auto& p : params_) buffers_.push_back(at::zeros_like(p.value));
  neg_lr_ = at::zeros({}, params_.empty() ? at::TensorOptions() : params_.front().value.options());
  if (options.fused && !params_.empty() && params_.front().value.is_cuda()) {
    std::vector<at::Tensor> values;
    std::vector<double> decay;
    for (const auto& p : params_) {
      values.push_back(p.value);
      decay.push_back(p.weight_decay);
    }
    fused_ = std::make_unique<cuda::FusedSgd>(values, buffers_, decay, momentum_);
  }
}

Sgd::~Sgd() = default;

void Sgd::gradients_moved() {
  if (fused_) fused_->refresh();
}

void Sgd::set_lr(double lr) { neg_lr_.fill_(-lr); }

std::vector<std::pair<std::string, at::Tensor>> Sgd::state() const {
  std::vector<std::pair<std::string, at::Tensor>> out;
  for (size_t i = 0; i < params_.size(); ++i) out.emplace_back(kPrefix + params_[i].name, buffers_[i]);
  return out;
}

void Sgd::step(const at::Tensor* found_inf, const at::Tensor* grad_scale) {
  torch::NoGradGuard no_grad;
  if (fused_) {
    fused_->step(neg_lr_, found_inf, grad_scale);
    return;
  }
  // keep = 1 when the step is applied; a skipped step leaves buffers and parameters untouched.
  const at::Tensor keep = found_inf ? found_inf->eq(0) : at::Tensor();
  for (size_t i = 0; i < params_.size(); ++i) {
    Param& p = params_[i];
    at::Tensor& buf = buffers_[i];
    const at::Tensor& raw = p.value.grad();
    if (!raw.defined()) continue;
    const at::Tensor grad = grad_scale ? raw * *grad_scale : raw;
    if (found_inf) {
      at::Tensor buffer = buf.mul(momentum_).add_(grad);
      if (p.weight_decay != 0.0) buffer.add_(p.value, p.weight_decay);
      buf.copy_(at::where(keep, buffer, buf));
      p.value.addcmul_(buf * keep, neg_lr_);
      continue;
    }
    buf.mul_(momentum_).add_(grad);
    if (p.weight_decay != 0.0) buf.add_(p.value, p.weight_decay);
    p.value.addcmul_(buf, neg_lr_);
  }
}

}  // namespace rn50::trainer
