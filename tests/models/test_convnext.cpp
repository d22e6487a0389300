// tests/models/test_convnext.cpp: ConvNeXt-Tiny: logits' shape, a training step, stochastic depth only in training,
// torchvision's parameter count and initialisation, the fusion line.
#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/nn/modules/conv.h>
#include <torch/utils.h>

#include <string>

#include "models/model.h"
#include "tests/support/model_checks.h"

namespace rn50::models {
namespace {

using testing::with_classes;

TEST(ConvNeXtTiny, GivesOneRowOfLogitsPerImage) {
  torch::manual_seed(1);
  auto model = create("convnext_tiny", with_classes(10));
  model->eval();
  torch::NoGradGuard no_grad;
  EXPECT_EQ(model->forward(at::randn({3, 3, 64, 64})).sizes(), (std::vector<int64_t>{3, 10}));
  EXPECT_EQ(model->forward(at::randn({1, 3, 96, 128})).sizes(), (std::vector<int64_t>{1, 10}));
  EXPECT_EQ(model->classifier_name(), "classifier.2");
  EXPECT_EQ(testing::parameter_count(*create("convnext_tiny", ModelOptions{})), 28589128);
}

// layer_scale starts at 1e-6: the branches' changes would round away in float32 at first, so it is set to 0.5.
TEST(ConvNeXtTiny, ATrainingStepReachesAndChangesEveryParameter) {
  torch::manual_seed(2);
  auto model = create("convnext_tiny", with_classes(4));
  {
    torch::NoGradGuard no_grad;
    for (auto& p : model->named_parameters()) {
      if (p.key().find("layer_scale") != std::string::npos) p.value().fill_(0.5);
    }
  }
  EXPECT_TRUE(testing::step_reaches_and_changes_every_parameter(*model, 2, 64, 4));
}

// Stochastic depth 0.9 at the deepest block drops most branches in training; in evaluation the model is the same
// function as one without stochastic depth.
TEST(ConvNeXtTiny, StochasticDepthIsOffInEvaluation) {
  ModelOptions dropping = with_classes(5), none = with_classes(5);
  dropping.stochastic_depth = 0.9;
  none.stochastic_depth = 0;
  EXPECT_TRUE(testing::regulariser_acts_only_in_training("convnext_tiny", dropping, none, at::randn({4, 3, 64, 64})));
}

TEST(ConvNeXtTiny, InitialisationFollowsTorchvision) {
  torch::manual_seed(4);
  auto model = create("convnext_tiny", ModelOptions{});
  EXPECT_TRUE(at::equal(testing::parameter(*model, "features.5.8.layer_scale"), at::full({384, 1, 1}, 1e-6)));
  const at::Tensor fc1 = testing::parameter(*model, "features.5.0.block.3.weight");  // [1536, 384]
  EXPECT_NEAR(fc1.std().item<double>(), 0.02, 0.0005);
  EXPECT_LT(fc1.abs().max().item<double>(), 2.0);  // truncated at +-2
  EXPECT_EQ(testing::parameter(*model, "features.2.1.bias").abs().sum().item<double>(), 0);
  EXPECT_EQ(testing::parameter(*model, "classifier.2.bias").abs().sum().item<double>(), 0);
  EXPECT_EQ(testing::parameter(*model, "classifier.0.weight").min().item<double>(), 1.0);
  EXPECT_NEAR(testing::parameter(*model, "features.0.0.weight").std().item<double>(), 0.02, 0.002);
  for (const auto& item : model->named_modules()) {
    if (item.key() == "features.1.0.block.0") {  // depthwise 7x7
      EXPECT_EQ(item.value()->as<torch::nn::Conv2d>()->options.groups(), 96);
    }
  }
}

TEST(ConvNeXtTiny, FusionLineNamesTheFusedOpsAndWhyTheCpuRunsAtens) {
  ModelOptions options;
  options.fusion = Fusion::kBatchNorm;
  const std::string line = create("convnext_tiny", options)->describe_fusion(at::zeros({2, 3, 64, 64}));
  EXPECT_NE(line.find("LayerNorm and layer scale + stochastic depth + add: ATen's ops (on the CPU)"), std::string::npos)
      << line;
  options.fusion = Fusion::kOff;
  EXPECT_NE(create("convnext_tiny", options)->describe_fusion(at::zeros({2, 3, 64, 64})).find("off:"),
            std::string::npos);
}

// The fused ops' ATen path (the CPU's, whatever fusion asks) computes what fusion: off computes, bit for bit: the same
// weights give the same logits and gradients in training, stochastic depth drawn from the same seed.
TEST(ConvNeXtTiny, FusionOnTheCpuTrainsExactlyAsFusionOff) {
  ModelOptions off, on;
  off.num_classes = on.num_classes = 10;
  on.fusion = Fusion::kConv;
  at::manual_seed(5);
  auto a = create("convnext_tiny", off);
  auto b = create("convnext_tiny", on);
  {
    torch::NoGradGuard no_grad;
    for (size_t i = 0; i < a->parameters().size(); ++i) b->parameters()[i].copy_(a->parameters()[i]);
  }
  const at::Tensor x = at::randn({2, 3, 32, 32});
  at::manual_seed(6);
  const at::Tensor la = a->forward(x);
  la.sum().backward();
  at::manual_seed(6);
  const at::Tensor lb = b->forward(x);
  lb.sum().backward();
  EXPECT_TRUE(torch::equal(la, lb));
  for (size_t i = 0; i < a->parameters().size(); ++i) {
    EXPECT_TRUE(torch::equal(a->parameters()[i].grad(), b->parameters()[i].grad())) << i;
  }
}

}  // namespace
}  // namespace rn50::models
