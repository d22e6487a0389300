// tests/models/test_alexnet.cpp: AlexNet, the port docs/porting.md follows: logits' shape, a training step, dropout
// only in training, torchvision's parameter count, the classifier's name and the fusion line.
#include <gtest/gtest.h>
#include <torch/utils.h>

#include <string>
#include <vector>

#include "models/model.h"
#include "tests/support/model_checks.h"

namespace rn50::models {
namespace {

using testing::with_classes;

TEST(AlexNet, GivesOneRowOfLogitsPerImageAtAnySizeFromItsSmallest) {
  torch::manual_seed(1);
  auto model = create("alexnet", with_classes(10));
  model->eval();
  torch::NoGradGuard no_grad;
  EXPECT_EQ(model->forward(at::randn({2, 3, 224, 224})).sizes(), (std::vector<int64_t>{2, 10}));
  EXPECT_EQ(model->forward(at::randn({1, 3, 63, 80})).sizes(), (std::vector<int64_t>{1, 10}));  // 63: the smallest
  EXPECT_EQ(model->classifier_name(), "classifier.6");
  EXPECT_EQ(testing::parameter_count(*create("alexnet", ModelOptions{})), 61100840);
  EXPECT_EQ(model->fixed_image_size(), 0);
}

TEST(AlexNet, ATrainingStepReachesAndChangesEveryParameter) {
  torch::manual_seed(2);
  auto model = create("alexnet", with_classes(4));
  EXPECT_TRUE(testing::step_reaches_and_changes_every_parameter(*model, 2, 64, 4));
}

// Dropout 0.9 in training; in evaluation the model is the same function as one without dropout.
TEST(AlexNet, DropoutIsOffInEvaluation) {
  ModelOptions dropping = with_classes(5), none = with_classes(5);
  dropping.dropout = 0.9;
  none.dropout = 0;
  EXPECT_TRUE(testing::regulariser_acts_only_in_training("alexnet", dropping, none, at::randn({2, 3, 64, 64})));
}

TEST(AlexNet, SaysItHasNothingToFuse) {
  ModelOptions fused = with_classes(3);
  fused.fusion = Fusion::kBatchNorm;
  EXPECT_NE(create("alexnet", fused)->describe_fusion(at::empty({1, 3, 64, 64})).find("none"), std::string::npos);
}

}  // namespace
}  // namespace rn50::models
