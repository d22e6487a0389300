// tests/trainer/test_optimizer.cpp: AdamW against LibTorch's torch::optim::AdamW, the skipped fp16 step, the gradient
// scale both optimizers take, the no-decay names, and the global-norm clipping coefficient.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>

#include "trainer/adamw.h"
#include "trainer/optimizer.h"
#include "trainer/sgd.h"

namespace rn50::trainer {
namespace {

struct TwoLayers : torch::nn::Module {
  TwoLayers() {
    // No bias before the BatchNorm: its gradient is rounding noise, which Adam's normalisation would magnify.
    conv = register_module("conv", torch::nn::Conv2d(torch::nn::Conv2dOptions(3, 4, 3).bias(false)));
    bn = register_module("bn", torch::nn::BatchNorm2d(4));
    fc = register_module("fc", torch::nn::Linear(4, 5));
    embedding = register_parameter("embedding", torch::randn({1, 4}));
  }
  torch::Tensor forward(const torch::Tensor& x) {
    return fc->forward(bn->forward(conv->forward(x)).mean({2, 3}) + embedding);
  }
  torch::nn::Conv2d conv{nullptr};
  torch::nn::BatchNorm2d bn{nullptr};
  torch::nn::Linear fc{nullptr};
  torch::Tensor embedding;
};

void copy_weights(torch::nn::Module& from, torch::nn::Module& to) {
  torch::NoGradGuard g;
  for (size_t i = 0; i < from.parameters().size(); ++i) to.parameters()[i].copy_(from.parameters()[i]);
}

double max_difference(torch::nn::Module& a, torch::nn::Module& b) {
  double worst = 0;
  for (size_t i = 0; i < a.parameters().size(); ++i)
    worst = std::max(worst, (a.parameters()[i] - b.parameters()[i]).abs().max().item<double>());
  return worst;
}

void backward_on(torch::nn::Module& m, TwoLayers& model, const torch::Tensor& x, const torch::Tensor& y) {
  (void)m;
  torch::nn::functional::cross_entropy(model.forward(x), y).backward();
}

OptimizerOptions adamw_options() {
  OptimizerOptions o;
  o.kind = OptimizerOptions::Kind::kAdamW;
  o.weight_decay = 0.05;
  o.beta1 = 0.9;
  o.beta2 = 0.95;
  o.eps = 1e-8;
  o.no_decay = {"embedding"};
  return o;
}

// LibTorch's AdamW with two groups: decoupled decay on the >1-D tensors but the embedding, none on the rest, over
// steps at changing rates (the bias correction follows the step count).
TEST(AdamW, MatchesLibTorchAdamWOverSeveralStepsWithChangingRate) {
  torch::manual_seed(11);
  auto ours = std::make_shared<TwoLayers>(), ref = std::make_shared<TwoLayers>();
  copy_weights(*ours, *ref);
  std::vector<torch::Tensor> decay, no_decay;
  for (const auto& item : ref->named_parameters())
    (item.value().dim() > 1 && item.key() != "embedding" ? decay : no_decay).push_back(item.value());
  std::vector<torch::optim::OptimizerParamGroup> groups;
  auto group_options = [](double wd) {
    return std::make_unique<torch::optim::AdamWOptions>(
        torch::optim::AdamWOptions(1e-3).betas({0.9, 0.95}).eps(1e-8).weight_decay(wd));
  };
  groups.emplace_back(decay, group_options(0.05));
  groups.emplace_back(no_decay, group_options(0));
  torch::optim::AdamW reference(groups, torch::optim::AdamWOptions(1e-3));
  auto adamw = make_optimizer(*ours, adamw_options());
  EXPECT_STREQ(adamw->name(), "adamw");
  auto initial = std::make_shared<TwoLayers>();
  copy_weights(*ours, *initial);
  const double rates[] = {1e-3, 3e-3, 1e-2, 2e-3, 5e-4, 1e-3};
  for (double lr : rates) {
    const auto x = torch::randn({6, 3, 8, 8});
    const auto y = torch::randint(5, {6});
    for (auto& group : reference.param_groups()) static_cast<torch::optim::AdamWOptions&>(group.options()).lr(lr);
    reference.zero_grad();
    backward_on(*ref, *ref, x, y);
    reference.step();
    adamw->set_lr(lr);
    adamw->zero_grad();
    backward_on(*ours, *ours, x, y);
    adamw->step();
  }
  const auto a = ours->named_parameters(), b = ref->named_parameters();
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_LT((a[i].value() - b[i].value()).abs().max().item<double>(), 1e-6) << a[i].key();
  }
  EXPECT_GT(max_difference(*ours, *initial), 1e-3);  // the steps moved the weights
}

// An overflowed fp16 step leaves the parameters, the moments and the step count as they were; the next one is the
// first to count.
TEST(AdamW, ASkippedStepChangesNothing) {
  torch::manual_seed(3);
  TwoLayers model;
  AdamW adamw(model, adamw_options());
  adamw.set_lr(1e-2);
  torch::nn::functional::cross_entropy(model.forward(torch::randn({4, 3, 8, 8})), torch::randint(5, {4})).backward();
  std::vector<torch::Tensor> before;
  for (const auto& p : model.parameters()) before.push_back(p.detach().clone());
  const torch::Tensor inf = torch::ones({});
  adamw.step(&inf);
  for (size_t i = 0; i < before.size(); ++i) EXPECT_TRUE(torch::equal(model.parameters()[i], before[i]));
  for (const auto& [name, t] : adamw.state()) EXPECT_EQ(t.abs().sum().item<double>(), 0.0) << name;
  const torch::Tensor ok = torch::zeros({});
  adamw.step(&ok);
  EXPECT_EQ(adamw.state().back().first, "adamw.step");
  EXPECT_EQ(adamw.state().back().second.item<double>(), 1.0);
}

// grad_scale multiplies every gradient: an update with scale s equals one with the gradients multiplied by s first.
TEST(Optimizer, GradScaleIsAGradientMultiplierForBoth) {
  for (const auto kind : {OptimizerOptions::Kind::kSgd, OptimizerOptions::Kind::kAdamW}) {
    torch::manual_seed(7);
    auto a = std::make_shared<TwoLayers>(), b = std::make_shared<TwoLayers>();
    copy_weights(*a, *b);
    OptimizerOptions o = adamw_options();
    o.kind = kind;
    auto oa = make_optimizer(*a, o), ob = make_optimizer(*b, o);
    const auto x = torch::randn({4, 3, 8, 8});
    const auto y = torch::randint(5, {4});
    for (auto* pair : {&a, &b}) torch::nn::functional::cross_entropy((*pair)->forward(x), y).backward();
    const torch::Tensor scale = torch::full({}, 0.25);
    {
      torch::NoGradGuard g;
      for (auto& p : b->parameters()) p.mutable_grad().mul_(0.25);
    }
    oa->set_lr(0.01);
    ob->set_lr(0.01);
    oa->step(nullptr, &scale);
    ob->step();
    EXPECT_LT(max_difference(*a, *b), 1e-7) << (kind == OptimizerOptions::Kind::kSgd ? "sgd" : "adamw");
  }
}

// The names a model excludes get no decay: with zero gradients and a zero first moment, only decay moves a weight.
TEST(Optimizer, NoDecayNamesAndOneDimensionalParametersKeepTheirValues) {
  TwoLayers model;
  OptimizerOptions o = adamw_options();
  o.kind = OptimizerOptions::Kind::kSgd;
  o.weight_decay = 0.5;
  Sgd sgd(model, o);
  for (auto& p : model.parameters()) p.mutable_grad() = torch::zeros_like(p);
  std::map<std::string, torch::Tensor> before;
  for (const auto& item : model.named_parameters()) before[item.key()] = item.value().detach().clone();
  sgd.set_lr(0.1);
  sgd.step();
  for (const auto& item : model.named_parameters()) {
    const bool decays = item.value().dim() > 1 && item.key() != "embedding";
    EXPECT_EQ(torch::equal(item.value(), before[item.key()]), !decays) << item.key();
  }
}

// min(1, max_norm / ||g||): the clipped gradients' global norm is max_norm when it was larger, unchanged otherwise.
TEST(ClipCoefficient, ScalesToTheGlobalNormOrLeavesAlone) {
  torch::manual_seed(2);
  const std::vector<torch::Tensor> grads = {torch::randn({3, 4}) * 5, torch::randn({7}) * 5, torch::randn({2, 2, 3})};
  double sq = 0;
  for (const auto& g : grads) sq += g.pow(2).sum().item<double>();
  const double norm = std::sqrt(sq);
  const double c = clip_coefficient(grads, 1.0).item<double>();
  EXPECT_NEAR(c, 1.0 / (norm + 1e-6), 1e-6);
  double clipped = 0;
  for (const auto& g : grads) clipped += (g * c).pow(2).sum().item<double>();
  EXPECT_NEAR(std::sqrt(clipped), 1.0, 1e-5);
  EXPECT_EQ(clip_coefficient(grads, 10 * norm).item<double>(), 1.0);
}

}  // namespace
}  // namespace rn50::trainer
