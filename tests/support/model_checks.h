// tests/support/model_checks.h: what the model tests ask of every model: its parameter count, one training step on
// the CPU that reaches every parameter, a named parameter, regularisers that act only in training.
#pragma once

#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/nn/module.h>
#include <torch/utils.h>

#include <string>
#include <vector>

#include "models/model.h"

namespace rn50::testing {

inline models::ModelOptions with_classes(int64_t classes) {
  models::ModelOptions o;
  o.num_classes = classes;
  return o;
}

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

// train_one_step's verdict: the loss reached every parameter and the step changed each one.
inline ::testing::AssertionResult step_reaches_and_changes_every_parameter(models::Classifier& model, int64_t batch,
                                                                           int64_t size, int64_t classes) {
  const StepResult step = train_one_step(model, batch, size, classes);
  if (!step.without_gradient.empty()) {
    return ::testing::AssertionFailure() << step.without_gradient.size() << " parameters without a gradient, first "
                                         << step.without_gradient.front();
  }
  const size_t total = model.parameters().size();
  if (step.changed.size() != total) {
    return ::testing::AssertionFailure() << "the step changed " << step.changed.size() << " of " << total
                                         << " parameters";
  }
  return ::testing::AssertionSuccess();
}

// A model whose options `dropping` turn a regulariser on (dropout, stochastic depth) against the same model with it
// off (`none`), both built from one seed: in evaluation the same function on x, in training two forwards differ
// (the drops are drawn anew each time).
inline ::testing::AssertionResult regulariser_acts_only_in_training(const std::string& name,
                                                                    const models::ModelOptions& dropping,
                                                                    const models::ModelOptions& none,
                                                                    const at::Tensor& x) {
  torch::manual_seed(3);
  auto a = models::create(name, dropping);
  torch::manual_seed(3);
  auto b = models::create(name, none);
  torch::NoGradGuard no_grad;
  a->eval();
  b->eval();
  if (!at::equal(a->forward(x), b->forward(x))) return ::testing::AssertionFailure() << "differs in evaluation";
  a->train();
  if (at::equal(a->forward(x), a->forward(x))) return ::testing::AssertionFailure() << "no drops in training";
  return ::testing::AssertionSuccess();
}

}  // namespace rn50::testing
