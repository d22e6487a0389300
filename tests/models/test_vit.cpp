// tests/models/test_vit.cpp: ViT-B/16: logits' shape, the image size it refuses, a training step, dropout only in
// training, torchvision's parameter count and initialisation, the parameters kept from weight decay.
#include <gtest/gtest.h>
#include <torch/utils.h>

#include <string>

#include "models/model.h"
#include "tests/support/error_of.h"
#include "tests/support/model_checks.h"

namespace rn50::models {
namespace {

using testing::with_classes;

// The head starts at zero (torchvision's): a random one makes the logits depend on the whole encoder.
void randomise_head(Classifier& model) {
  torch::NoGradGuard no_grad;
  testing::parameter(model, "heads.head.weight").normal_(0, 0.02);
}

TEST(VitB16, NamesItsClassifierAndImageSize) {
  auto model = create("vit_b_16", with_classes(10));
  EXPECT_EQ(model->classifier_name(), "heads.head");
  EXPECT_EQ(model->fixed_image_size(), 224);
  EXPECT_EQ(testing::parameter_count(*model), 86567656 - 990 * 769);  // torchvision's, with 10 classes for 1000
}

TEST(VitB16, RefusesOtherImageSizesNamingTheKey) {
  auto model = create("vit_b_16", with_classes(10));
  model->eval();
  torch::NoGradGuard no_grad;
  const std::string error = testing::config_error_of([&] { model->forward(at::randn({1, 3, 64, 64})); });
  EXPECT_NE(error.find("config key 'image_size'"), std::string::npos) << error;
  EXPECT_NE(error.find("197 tokens"), std::string::npos) << error;
}

// The head starts at zero (no gradient reaches the encoder then): with a random one, one step reaches everything.
TEST(VitB16, ATrainingStepReachesAndChangesEveryParameter) {
  torch::manual_seed(2);
  auto model = create("vit_b_16", with_classes(3));
  randomise_head(*model);
  EXPECT_TRUE(testing::step_reaches_and_changes_every_parameter(*model, 1, 224, 3));
}

// One row of logits per image; dropout 0.5 in training, and in evaluation the same function as a model without.
// (A 224 px forward takes seconds on a small CPU: this test holds all the forwards.)
TEST(VitB16, GivesLogitsPerImageAndDropoutIsOffInEvaluation) {
  ModelOptions dropping = with_classes(4), none = with_classes(4);
  dropping.dropout = 0.5;
  none.dropout = 0;
  torch::manual_seed(3);
  auto a = create("vit_b_16", dropping);
  torch::manual_seed(3);
  auto b = create("vit_b_16", none);
  randomise_head(*a);
  torch::NoGradGuard no_grad;
  testing::parameter(*b, "heads.head.weight").copy_(testing::parameter(*a, "heads.head.weight"));
  const auto x = at::randn({2, 3, 224, 224});
  a->eval();
  b->eval();
  const at::Tensor logits = a->forward(x);
  EXPECT_EQ(logits.sizes(), (std::vector<int64_t>{2, 4}));
  EXPECT_FALSE(at::equal(logits[0], logits[1]));
  const auto one = x.slice(0, 0, 1);
  EXPECT_TRUE(at::allclose(logits.slice(0, 0, 1), b->forward(one), 1e-5, 1e-6));  // batch 1: other BLAS blocking
  a->train();
  EXPECT_FALSE(at::equal(a->forward(one), a->forward(one)));
}

TEST(VitB16, InitialisationFollowsTorchvision) {
  torch::manual_seed(4);
  auto model = create("vit_b_16", ModelOptions{});
  EXPECT_EQ(testing::parameter(*model, "class_token").abs().sum().item<double>(), 0);
  EXPECT_EQ(testing::parameter(*model, "heads.head.weight").abs().sum().item<double>(), 0);
  EXPECT_NEAR(testing::parameter(*model, "encoder.pos_embedding").std().item<double>(), 0.02, 0.0005);
  EXPECT_NEAR(testing::parameter(*model, "conv_proj.weight").std().item<double>(), std::sqrt(1.0 / 768), 0.001);
  // nn.MultiheadAttention's: Xavier uniform in_proj_weight, zero biases.
  const at::Tensor in_proj = testing::parameter(*model, "encoder.layers.encoder_layer_3.self_attention.in_proj_weight");
  const double bound = std::sqrt(6.0 / (768 + 2304));
  EXPECT_LE(in_proj.abs().max().item<double>(), bound);
  EXPECT_NEAR(in_proj.std().item<double>(), bound / std::sqrt(3.0), 0.01 * bound);
  EXPECT_EQ(testing::parameter(*model, "encoder.layers.encoder_layer_3.self_attention.in_proj_bias")
                .abs()
                .sum()
                .item<double>(),
            0);
  // MLPBlock's: Xavier uniform weights, biases normal with std 1e-6.
  const at::Tensor mlp_bias = testing::parameter(*model, "encoder.layers.encoder_layer_0.mlp.0.bias");
  EXPECT_GT(mlp_bias.abs().max().item<double>(), 0);
  EXPECT_LT(mlp_bias.abs().max().item<double>(), 1e-5);
  EXPECT_EQ(model->no_weight_decay(), (std::vector<std::string>{"class_token", "encoder.pos_embedding"}));
}

}  // namespace
}  // namespace rn50::models
