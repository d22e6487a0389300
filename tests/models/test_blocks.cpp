// tests/models/test_blocks.cpp: the shared pieces: stochastic depth's rows and scaling, the probabilities' defaults
// and range, the truncated normal, LayerNorm over channels, Linear on input of any rank.
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <torch/utils.h>

#include <string>
#include <vector>

#include "models/blocks.h"
#include "tests/support/error_of.h"

namespace rn50::models {
namespace {

TEST(StochasticDepth, DropsWholeRowsAndScalesTheSurvivors) {
  at::manual_seed(1);
  const at::Tensor x = at::ones({4000, 3, 2, 2});
  const at::Tensor y = stochastic_depth(x, 0.25, /*training=*/true);
  const at::Tensor rows = y.flatten(1);
  // Each sample's branch is all dropped or all kept at 1 / 0.75.
  EXPECT_TRUE(at::equal(rows.amin(1), rows.amax(1)));
  EXPECT_TRUE(at::logical_or(rows.amin(1) == 0, (rows.amin(1) - 1 / 0.75).abs() < 1e-6).all().item<bool>());
  EXPECT_NEAR((rows.amin(1) == 0).to(at::kFloat).mean().item<double>(), 0.25, 0.03);
  EXPECT_TRUE(stochastic_depth(x, 0.25, /*training=*/false).is_same(x));
  EXPECT_TRUE(stochastic_depth(x, 0.0, /*training=*/true).is_same(x));
  EXPECT_EQ(stochastic_depth(x, 1.0, /*training=*/true).abs().sum().item<double>(), 0);
}

TEST(Probabilities, NegativeMeansTorchvisionsDefaultAndAboveOneIsAConfigError) {
  EXPECT_EQ(probability_or_default(-1, 0.2, "dropout"), 0.2);
  EXPECT_EQ(probability_or_default(0, 0.2, "dropout"), 0.0);
  EXPECT_EQ(probability_or_default(0.5, 0.2, "dropout"), 0.5);
  const std::string error = testing::config_error_of([] { probability_or_default(1.5, 0.2, "stochastic_depth"); });
  EXPECT_NE(error.find("config key 'stochastic_depth'"), std::string::npos) << error;
}

TEST(TruncNormal, HasTheStdAndStaysInsideTheBounds) {
  at::manual_seed(2);
  at::Tensor t = at::empty({200000});
  trunc_normal_(t, 1.0, 0.0, -1.0, 1.0);
  EXPECT_GE(t.min().item<double>(), -1.0);
  EXPECT_LE(t.max().item<double>(), 1.0);
  EXPECT_NEAR(t.std().item<double>(), 0.5396, 0.005);  // a standard normal truncated at +-1
  trunc_normal_(t, 0.02);
  EXPECT_NEAR(t.std().item<double>(), 0.02, 0.0002);
}

TEST(LayerNormChannels, NormalisesEachPixelOverItsChannels) {
  at::manual_seed(3);
  const at::Tensor x = at::randn({2, 8, 3, 5}) * 3 + 1;
  torch::nn::LayerNorm norm(torch::nn::LayerNormOptions({8}).eps(1e-6));
  {
    torch::NoGradGuard no_grad;
    norm->weight.copy_(at::randn({8}));
    norm->bias.copy_(at::randn({8}));
  }
  const at::Tensor weight = norm->weight.detach(), bias = norm->bias.detach();
  const at::Tensor y = layer_norm_channels(x, norm, at::kFloat, ModelOptions{});
  const at::Tensor mean = x.mean(1, true), var = x.var(1, /*unbiased=*/false, true);
  const at::Tensor expected = (x - mean) / (var + 1e-6).sqrt() * weight.view({1, 8, 1, 1}) + bias.view({1, 8, 1, 1});
  EXPECT_EQ(y.sizes(), x.sizes());
  EXPECT_TRUE(at::allclose(y, expected, 1e-5, 1e-5));
}

// linear(fc, x) is nn::Linear's function on input of two, three and four dimensions, the bias added once (ATen folds
// the leading dimensions into one matrix product with the bias in its epilogue; the C++ frontend adds it apart).
TEST(Linear, IsTheLinearLayersFunctionOnInputOfAnyRank) {
  torch::manual_seed(3);
  torch::nn::Linear fc(24, 40);
  for (const std::vector<int64_t>& shape : std::vector<std::vector<int64_t>>{{5, 24}, {3, 7, 24}, {2, 3, 5, 24}}) {
    const at::Tensor x = at::randn(shape);
    const at::Tensor got = linear(fc, x);
    const at::Tensor want = fc->forward(x);
    ASSERT_EQ(got.sizes(), want.sizes());
    EXPECT_TRUE(at::allclose(got, want, 1e-5, 1e-6)) << (got - want).abs().max().item<double>();
    at::Tensor no_bias = at::matmul(x, fc->weight.t());
    EXPECT_GT((got - no_bias).abs().max().item<double>(), 1e-3);  // the bias is there
  }
}

}  // namespace
}  // namespace rn50::models
