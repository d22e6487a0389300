// trainer/adamw.cpp: the AdamW update: one fused kernel on a GPU, ATen's ops elsewhere (the reference).
#include "trainer/adamw.h"

#include <ATen/ATen.h>
#include <torch/nn/module.h>
#include <torch/utils.h>

#include "cuda/device_ops.h"

namespace rn50::trainer {

AdamW::AdamW(torch::nn::Module& model, const OptimizerOptions& options)
    : Optimizer(model, options), beta1_(options.beta1), beta2_(options.beta2), eps_(options.eps) {
  torch::NoGradGuard no_grad;
  for (const auto& p : params_) {
    exp_avg_.push_back(at::zeros_like(p.value));
    exp_avg_sq_.push_back(at::zeros_like(p.value));
  }
  const auto on_device = params_.empty() ? at::TensorOptions() : params_.front().value.options();
  lr_ = at::zeros({}, on_device.dtype(at::kFloat));
  steps_ = at::zeros({}, on_device.dtype(at::kFloat));
  if (options.fused && !params_.empty() && params_.front().value.is_cuda()) {
    std::vector<at::Tensor> values;
    std::vector<double> decay;
    for (const auto& p : params_) {
      values.push_back(p.value);
      decay.push_back(p.weight_decay);
    }
    fused_ = std::make_unique<cuda::FusedAdamW>(values, exp_avg_, exp_avg_sq_, decay, beta1_, beta2_, eps_);
  }
}

AdamW::~AdamW() = default;

void AdamW::gradients_moved() {
  if (fused_) fused_->refresh();
}

void AdamW::set_lr(double lr) { lr_.fill_(lr); }

std::vector<std::pair<std::string, at::Tensor>> AdamW::state() const {
  std::vector<std::pair<std::string, at::Tensor>> out;
  for (size_t i = 0; i < params_.size(); ++i) {
    out.emplace_back(std::string(kPrefix) + "exp_avg." + params_[i].name, exp_avg_[i]);
    out.emplace_back(std::string(kPrefix) + "exp_avg_sq." + params_[i].name, exp_avg_sq_[i]);
  }
  out.emplace_back(std::string(kPrefix) + "step", steps_);
  return out;
}

void AdamW::step(const at::Tensor* found_inf, const at::Tensor* grad_scale) {
  torch::NoGradGuard no_grad;
  // The step count first: the kernel and the ATen path both read the count that includes this update.
  if (found_inf) {
    steps_.add_(found_inf->eq(0).to(at::kFloat));
  } else {
    steps_.add_(1);
  }
  if (fused_) {
    fused_->step(lr_, steps_, found_inf, grad_scale);
    return;
  }
  const at::Tensor keep = found_inf ? found_inf->eq(0) : at::Tensor();
  // On a skipped first step the count is 0 and the corrections divide by 0: `keep` discards those values.
  const at::Tensor step_size = lr_ / (1 - at::pow(beta1_, steps_));
  const at::Tensor correction2_sqrt = (1 - at::pow(beta2_, steps_)).sqrt();
  for (size_t i = 0; i < params_.size(); ++i) {
    Param& p = params_[i];
    const at::Tensor& raw = p.value.grad();
    if (!raw.defined()) continue;
    const at::Tensor grad = grad_scale ? raw * *grad_scale : raw;
    at::Tensor m = exp_avg_[i].mul(beta1_).add_(grad, 1 - beta1_);
    at::Tensor v = exp_avg_sq_[i].mul(beta2_).addcmul_(grad, grad, 1 - beta2_);
    at::Tensor value = p.value.mul(1 - lr_ * p.weight_decay);
    value.sub_(step_size * m / (v.sqrt() / correction2_sqrt + eps_));
    if (found_inf) {
      exp_avg_[i].copy_(at::where(keep, m, exp_avg_[i]));
      exp_avg_sq_[i].copy_(at::where(keep, v, exp_avg_sq_[i]));
      p.value.copy_(at::where(keep, value, p.value));
    } else {
      exp_avg_[i].copy_(m);
      exp_avg_sq_[i].copy_(v);
      p.value.copy_(value);
    }
  }
}

}  // namespace rn50::trainer
