// trainer/optimizer.cpp: what every optimizer shares (its parameters, their decay, gradients), make_optimizer and the
// global-norm clipping coefficient.
#include "trainer/optimizer.h"

#include <ATen/ATen.h>
#include <torch/nn/module.h>
#include <torch/utils.h>

#include <algorithm>

#include "trainer/adamw.h"
#include "trainer/sgd.h"

namespace rn50::trainer {

Optimizer::~Optimizer() = default;

Optimizer::Optimizer(torch::nn::Module& model, const OptimizerOptions& options) {
  for (const auto& item : model.named_parameters(/*recurse=*/true)) {
    const at::Tensor& p = item.value();
    if (!p.requires_grad()) continue;
    const bool named =
        std::find(options.no_decay.begin(), options.no_decay.end(), item.key()) != options.no_decay.end();
    const bool decays = !named && (options.decay_norms_and_biases || p.dim() > 1);
    params_.push_back({item.key(), p, decays ? options.weight_decay : 0.0});
  }
}

std::vector<at::Tensor> Optimizer::grads() const {
  std::vector<at::Tensor> out;
  for (const auto& p : params_) {
    if (p.value.grad().defined()) out.push_back(p.value.grad());
  }
  return out;
}

void Optimizer::release_grads() {
  for (auto& p : params_) p.value.mutable_grad() = at::Tensor();
}

void Optimizer::zero_grad() {
  for (auto& p : params_) {
    at::Tensor grad = p.value.mutable_grad();
    if (grad.defined()) grad.zero_();
  }
}

std::string Optimizer::describe() const {
  size_t decayed = 0;
  for (const auto& p : params_) decayed += p.weight_decay != 0;
  return std::string(name()) + (fused() ? ": one fused kernel over " : ": ATen's ops over ") +
         std::to_string(params_.size()) + " tensors; weight decay on " + std::to_string(decayed) + ", none on " +
         std::to_string(params_.size() - decayed);
}

bool is_optimizer_state(const std::string& tensor_name) {
  return tensor_name.rfind(Sgd::kPrefix, 0) == 0 || tensor_name.rfind(AdamW::kPrefix, 0) == 0;
}

std::unique_ptr<Optimizer> make_optimizer(torch::nn::Module& model, const OptimizerOptions& options) {
  switch (options.kind) {
    case OptimizerOptions::Kind::kAdamW:
      return std::make_unique<AdamW>(model, options);
    case OptimizerOptions::Kind::kSgd:
      break;
  }
  return std::make_unique<Sgd>(model, options);
}

at::Tensor clip_coefficient(const std::vector<at::Tensor>& grads, double max_norm) {
  torch::NoGradGuard no_grad;
  std::vector<at::Tensor> norms;
  norms.reserve(grads.size());
  for (const auto& g : grads) norms.push_back(at::linalg_vector_norm(g, 2));
  const at::Tensor total = at::linalg_vector_norm(at::stack(norms), 2);
  return (at::full({}, max_norm, total.options()) / (total + 1e-6)).clamp_max(1.0);
}

}  // namespace rn50::trainer
