// trainer/sgd.cpp: the momentum SGD update, one fused-friendly sequence of in-place ops per parameter.
#include "trainer/sgd.h"

#include <torch/nn/module.h>
#include <torch/utils.h>

namespace rn50::trainer {

Sgd::Sgd(torch::nn::Module& model, double momentum, double weight_decay, bool decay_bn_and_bias)
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
}

void Sgd::set_lr(double lr) { neg_lr_.fill_(-lr); }

void Sgd::step() {
  torch::NoGradGuard no_grad;
  for (auto& p : params_) {
    const at::Tensor& grad = p.value.grad();
    if (!grad.defined()) continue;
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
