// trainer/sgd.cpp: the momentum SGD update, one fused-friendly sequence of in-place ops per parameter.
#include "trainer/sgd.h"

#include <ATen/ATen.h>
#include <torch/nn/module.h>
#include <torch/utils.h>

#include "cuda/device_ops.h"

namespace rn50::trainer {

Sgd::Sgd(torch::nn::Module& model, double momentum, double weight_decay, bool decay_bn_and_bias, bool fused)
    : momentum_(momentum) {
  torch::NoGradGuard no_grad;
  for (const auto& item : model.named_parameters(/*recurse=*/true)) {
    const at::Tensor& p = item.value();
    if (!p.requires_grad()) continue;
    const bool decays = decay_bn_and_bias || p.dim() > 1;
    // Zero momentum makes the first update buf = grad, as PyTorch's lazy initialisation does.
    at::Tensor buffer = at::zeros_like(p);
    params_.push_back({p, buffer, decays ? weight_decay : 0.0});
    buffers_.emplace_back(item.key(), buffer);
  }
  neg_lr_ = at::zeros({}, params_.empty() ? at::TensorOptions() : params_.front().value.options());
  if (fused && !params_.empty() && params_.front().value.is_cuda()) {
    std::vector<at::Tensor> values, buffers;
    std::vector<double> decay;
    for (const auto& p : params_) {
      values.push_back(p.value);
      buffers.push_back(p.buffer);
      decay.push_back(p.weight_decay);
    }
    fused_ = std::make_unique<cuda::FusedSgd>(values, buffers, decay, momentum_);
  }
}

Sgd::~Sgd() = default;

std::vector<at::Tensor> Sgd::grads() const {
  std::vector<at::Tensor> out;
  for (const auto& p : params_) {
    if (p.value.grad().defined()) out.push_back(p.value.grad());
  }
  return out;
}

void Sgd::set_lr(double lr) { neg_lr_.fill_(-lr); }

void Sgd::step(const at::Tensor* found_inf) {
  torch::NoGradGuard no_grad;
  if (fused_) {
    fused_->step(neg_lr_, found_inf);
    return;
  }
  // keep = 1 when the step is applied; a skipped step leaves buffers and parameters untouched.
  const at::Tensor keep = found_inf ? found_inf->eq(0) : at::Tensor();
  for (auto& p : params_) {
    const at::Tensor& grad = p.value.grad();
    if (!grad.defined()) continue;
    if (found_inf) {
      at::Tensor buffer = p.buffer.mul(momentum_).add_(grad);
      if (p.weight_decay != 0.0) buffer.add_(p.value, p.weight_decay);
      p.buffer.copy_(at::where(keep, buffer, p.buffer));
      p.value.addcmul_(p.buffer * keep, neg_lr_);
      continue;
    }
    p.buffer.mul_(momentum_).add_(grad);
    if (p.weight_decay != 0.0) p.buffer.add_(p.value, p.weight_decay);
    p.value.addcmul_(p.buffer, neg_lr_);
  }
}

void Sgd::zero_grad() {
  for (auto& p : params_) {
    at::Tensor grad = p.value.mutable_grad();
    if (grad.defined()) grad.zero_();
  }
}

}  // namespace rn50::trainer
