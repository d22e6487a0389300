// tests/support/model_checks.h: what the model tests ask of every model: its parameter count, one training step on
// the CPU, a named parameter.
#pragma once

#include <ATen/ATen.h>
#include <torch/nn/module.h>
#include <torch/utils.h>

#include <string>
#include <vector>

#include "models/model.h"

namespace rn50::testing {

inline int64_t parameter_count(const torch::nn::Module& model) {
  int64_t n = 0;
  for (const auto& p : model.parameters()) n += p.numel();
  return n;
}

// The parameter of that name (undefined when there is none).
inline at::Tensor parameter(const torch::nn::Module& model, const std::string& name) {
  for (const auto& p : model.named_parameters()) {
    if (p.key() == name) return p.value();
  }
  return {};
}

struct StepResult {
  std::vector<std::string> without_gradient;  // parameters the loss did not reach
  std::vector<std::string> changed;           // parameters the step changed
};

// One SGD step (learning rate 0.1) of the cross-entropy of random images against random labels, in training mode.
inline StepResult train_one_step(models::Classifier& model, int64_t batch, int64_t size, int64_t classes) {
  model.train();
  for (auto& p : model.parameters()) p.mutable_grad() = at::Tensor();
  std::vector<std::pair<std::string, at::Tensor>> before;
  for (const auto& p : model.named_parameters()) before.emplace_back(p.key(), p.value().detach().clone());
  const at::Tensor images = at::randn({batch, 3, size, size});
  const at::Tensor labels = at::randint(classes, {batch}, at::kLong);
  at::nll_loss(at::log_softmax(model.forward(images), 1), labels).backward();
  StepResult result;
  {
    torch::NoGradGuard no_grad;
    for (auto& p : model.named_parameters()) {
      if (p.value().grad().defined()) {
        p.value().sub_(p.value().grad() * 0.1);
      } else {
        result.without_gradient.push_back(p.key());
      }
    }
  }
  for (const auto& [name, old] : before) {
    if (!at::equal(parameter(model, name), old)) result.changed.push_back(name);
  }
  return result;
}

}  // namespace rn50::testing
