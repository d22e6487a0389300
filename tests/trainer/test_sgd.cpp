// tests/trainer/test_sgd.cpp: rn50's device-rate SGD against LibTorch's torch::optim::SGD on random problems.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "trainer/sgd.h"

namespace rn50::trainer {
namespace {

struct TwoLayers : torch::nn::Module {
  TwoLayers() {
    conv = register_module("conv", torch::nn::Conv2d(torch::nn::Conv2dOptions(3, 4, 3)));
    bn = register_module("bn", torch::nn::BatchNorm2d(4));
    fc = register_module("fc", torch::nn::Linear(4, 5));
  }
  torch::Tensor forward(const torch::Tensor& x) { return fc->forward(bn->forward(conv->forward(x)).mean({2, 3})); }
  torch::nn::Conv2d conv{nullptr};
  torch::nn::BatchNorm2d bn{nullptr};
  torch::nn::Linear fc{nullptr};
};

// LibTorch's SGD with two groups: weight decay on >1-D tensors only, as rn50 configures by default.
TEST(Sgd, MatchesLibTorchSgdOverSeveralStepsWithChangingRate) {
  torch::manual_seed(11);
  auto ours = std::make_shared<TwoLayers>();
  auto ref = std::make_shared<TwoLayers>();
  {
    torch::NoGradGuard g;
    for (size_t i = 0; i < ours->parameters().size(); ++i) ref->parameters()[i].copy_(ours->parameters()[i]);
  }
  std::vector<torch::Tensor> decay, no_decay;
  for (auto& p : ref->parameters()) (p.dim() > 1 ? decay : no_decay).push_back(p);
  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.emplace_back(decay, std::make_unique<torch::optim::SGDOptions>(
                                 torch::optim::SGDOptions(0.1).momentum(0.9).weight_decay(1e-2)));
  groups.emplace_back(no_decay, std::make_unique<torch::optim::SGDOptions>(
                                    torch::optim::SGDOptions(0.1).momentum(0.9).weight_decay(0)));
  torch::optim::SGD reference(groups, torch::optim::SGDOptions(0.1));
  Sgd sgd(*ours, 0.9, 1e-2, /*decay_bn_and_bias=*/false);

  const double rates[] = {0.05, 0.1, 0.2, 0.07, 0.01};
  for (double lr : rates) {
    const auto x = torch::randn({6, 3, 8, 8});
    const auto y = torch::randint(5, {6});
    for (auto& group : reference.param_groups()) static_cast<torch::optim::SGDOptions&>(group.options()).lr(lr);
    reference.zero_grad();
    torch::nn::functional::cross_entropy(ref->forward(x), y).backward();
    reference.step();
    sgd.set_lr(lr);
    sgd.zero_grad();
    torch::nn::functional::cross_entropy(ours->forward(x), y).backward();
    sgd.step();
  }
  const auto a = ours->named_parameters();
  const auto b = ref->named_parameters();
  for (size_t i = 0; i < a.size(); ++i) {
    const double err = (a[i].value() - b[i].value()).abs().max().item<double>();
    EXPECT_LT(err, 1e-6) << a[i].key();
  }
}

TEST(Sgd, ZeroGradKeepsGradientMemory) {
  auto model = std::make_shared<TwoLayers>();
  Sgd sgd(*model, 0.9, 0, false);
  torch::nn::functional::cross_entropy(model->forward(torch::randn({2, 3, 8, 8})), torch::randint(5, {2})).backward();
  const void* before = model->fc->weight.grad().data_ptr();
  sgd.zero_grad();
  EXPECT_EQ(model->fc->weight.grad().data_ptr(), before);
  EXPECT_EQ(model->fc->weight.grad().abs().sum().item<double>(), 0.0);
}

}  // namespace
}  // namespace rn50::trainer
