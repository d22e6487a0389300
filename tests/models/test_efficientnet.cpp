// tests/models/test_efficientnet.cpp: EfficientNet-B0: logits' shape, a training step, stochastic depth and dropout
// only in training, torchvision's parameter count and initialisation, the fusion line.
#include <gtest/gtest.h>
#include <torch/nn/modules/conv.h>
#include <torch/utils.h>

#include <cmath>
#include <string>

#include "models/model.h"
#include "tests/support/model_checks.h"

namespace rn50::models {
namespace {

using testing::with_classes;

TEST(EfficientNetB0, GivesOneRowOfLogitsPerImage) {
  torch::manual_seed(1);
  auto model = create("efficientnet_b0", with_classes(10));
  model->eval();
  torch::NoGradGuard no_grad;
  EXPECT_EQ(model->forward(at::randn({3, 3, 64, 64})).sizes(), (std::vector<int64_t>{3, 10}));
  EXPECT_EQ(model->forward(at::randn({1, 3, 100, 72})).sizes(), (std::vector<int64_t>{1, 10}));
  EXPECT_EQ(model->classifier_name(), "classifier.1");
  EXPECT_EQ(testing::parameter_count(*create("efficientnet_b0", ModelOptions{})), 5288548);
}

TEST(EfficientNetB0, ATrainingStepReachesAndChangesEveryParameter) {
  torch::manual_seed(2);
  auto model = create("efficientnet_b0", with_classes(4));
  EXPECT_TRUE(testing::step_reaches_and_changes_every_parameter(*model, 2, 64, 4));
}

// Stochastic depth and dropout at 0.9 in training; in evaluation the model is the same function as one without.
TEST(EfficientNetB0, StochasticDepthAndDropoutAreOffInEvaluation) {
  ModelOptions dropping = with_classes(5), none = with_classes(5);
  dropping.stochastic_depth = dropping.dropout = 0.9;
  none.stochastic_depth = none.dropout = 0;
  EXPECT_TRUE(testing::regulariser_acts_only_in_training("efficientnet_b0", dropping, none, at::randn({4, 3, 64, 64})));
}

TEST(EfficientNetB0, InitialisationFollowsTorchvision) {
  torch::manual_seed(4);
  auto model = create("efficientnet_b0", ModelOptions{});
  const at::Tensor expand = testing::parameter(*model, "features.6.1.block.0.0.weight");  // [1152, 192, 1, 1]
  EXPECT_NEAR(expand.std().item<double>(), std::sqrt(2.0 / 1152), 0.02 * std::sqrt(2.0 / 1152));
  const at::Tensor fc = testing::parameter(*model, "classifier.1.weight");
  EXPECT_LE(fc.abs().max().item<double>(), 1.0 / std::sqrt(1000.0));
  EXPECT_NEAR(fc.std().item<double>(), 1.0 / std::sqrt(3000.0), 0.01 / std::sqrt(1000.0));
  EXPECT_EQ(testing::parameter(*model, "classifier.1.bias").abs().sum().item<double>(), 0);
  EXPECT_EQ(testing::parameter(*model, "features.2.0.block.2.fc1.bias").abs().sum().item<double>(), 0);
  // torchvision has no zero_init_residual for EfficientNet: the projections' BatchNorms start at 1.
  EXPECT_EQ(testing::parameter(*model, "features.2.1.block.3.1.weight").min().item<double>(), 1.0);
  for (const auto& item : model->named_modules()) {
    if (item.key() == "features.3.0.block.1.0") {  // depthwise 5x5, stride 2
      const auto* c = item.value()->as<torch::nn::Conv2d>();
      EXPECT_EQ(c->options.groups(), 144);
      EXPECT_EQ(c->options.stride()->at(0), 2);
    }
  }
}

TEST(EfficientNetB0, FusionLineNamesTheFusedAndTheUnfused) {
  ModelOptions options;
  options.fusion = Fusion::kBatchNorm;
  const std::string line = create("efficientnet_b0", options)->describe_fusion(at::zeros({2, 3, 64, 64}));
  // On the CPU every fused path falls back to ATen's ops, and the line says so and names the fused pairs' kernels.
  EXPECT_NE(line.find("bn: ATen's separate ops (on the CPU)"), std::string::npos) << line;
}

}  // namespace
}  // namespace rn50::models
