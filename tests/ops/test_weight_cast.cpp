// tests/ops/test_weight_cast.cpp: cast_weights on the CPU (one cast per tensor) against w.to(dtype) and
// grad.to(float32), bit for bit, on fresh random weights of several layouts; the gradients' strides, the copies
// nobody used, and the refusals.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <stdexcept>
#include <vector>

#include "ops/weight_cast.h"
#include "ops/weight_cast_backend.h"

namespace rn50::ops {
namespace {

constexpr auto kChannelsLast = at::MemoryFormat::ChannelsLast;

// A ResNet bottleneck's weights in both layouts, and a 2-D one.
std::vector<at::Tensor> some_weights() {
  return {torch::randn({64, 256, 1, 1}).contiguous(kChannelsLast),
          torch::randn({64, 64, 3, 3}).contiguous(kChannelsLast), torch::randn({256, 64, 1, 1}),
          torch::randn({5, 3, 7, 7}).contiguous(kChannelsLast) * 1e4, torch::randn({10, 13}) * 1e-6};
}

TEST(CastWeights, CopiesAreTheCastsAndGradientsComeBackAsFloat32) {
  for (const at::ScalarType dtype : {at::kHalf, at::kBFloat16}) {
    std::vector<at::Tensor> weights, reference;
    for (const at::Tensor& w : some_weights()) {
      weights.push_back(w.clone().requires_grad_(true));
      reference.push_back(w.clone().requires_grad_(true));
    }
    const std::vector<at::Tensor> copies = cast_weights(weights, dtype);
    ASSERT_EQ(copies.size(), weights.size());
    std::vector<at::Tensor> outputs, grads;
    for (size_t i = 0; i < weights.size(); ++i) {
      const at::Tensor want = reference[i].to(dtype);
      EXPECT_EQ(copies[i].scalar_type(), dtype);
      EXPECT_EQ(copies[i].strides(), weights[i].strides()) << i;
      EXPECT_TRUE(torch::equal(copies[i], want)) << i;
      // Gradients in the lower precision, values that float32 holds exactly.
      const at::Tensor g = torch::randn(weights[i].sizes()).to(dtype);
      outputs.push_back((copies[i] * g).sum());
      grads.push_back(g);
      (want * g).sum().backward();
    }
    at::stack(outputs).sum().backward();
    for (size_t i = 0; i < weights.size(); ++i) {
      ASSERT_TRUE(weights[i].grad().defined()) << i;
      EXPECT_EQ(weights[i].grad().scalar_type(), at::kFloat);
      EXPECT_EQ(weights[i].grad().strides(), weights[i].strides()) << i;
      EXPECT_TRUE(torch::equal(weights[i].grad(), reference[i].grad())) << i;
    }
  }
}

TEST(CastWeights, ACopyNobodyUsesGivesItsWeightNoGradient) {
  std::vector<at::Tensor> weights;
  for (const at::Tensor& w : some_weights()) weights.push_back(w.requires_grad_(true));
  const std::vector<at::Tensor> copies = cast_weights(weights, at::kHalf);
  (copies[0].to(at::kFloat).sum() + copies[2].to(at::kFloat).sum() * 3).backward();
  EXPECT_TRUE(torch::equal(weights[0].grad(), torch::ones_like(weights[0])));
  EXPECT_TRUE(torch::equal(weights[2].grad(), torch::full_like(weights[2], 3)));
  for (const size_t unused : {1, 3, 4}) EXPECT_FALSE(weights[unused].grad().defined()) << unused;
}

TEST(CastWeights, WithoutGradientsItIsJustTheCasts) {
  const std::vector<at::Tensor> weights = some_weights();
  const std::vector<at::Tensor> copies = cast_weights(weights, at::kHalf);
  for (size_t i = 0; i < weights.size(); ++i) {
    EXPECT_FALSE(copies[i].requires_grad());
    EXPECT_TRUE(torch::equal(copies[i], weights[i].to(at::kHalf)));
  }
  EXPECT_TRUE(cast_weights({}, at::kHalf).empty());
}

// The kernels' condition: one dense block each, elements in the same order. A 1x1 convolution's weight is that in
// either of its layouts; a transposed or strided tensor is not.
TEST(CastWeights, LayoutsAlikeIgnoreTheStridesOfUnitDimensions) {
  const at::Tensor one_by_one = torch::randn({64, 32, 1, 1});
  EXPECT_TRUE(detail::same_dense_layout(one_by_one, one_by_one.contiguous(kChannelsLast)));
  EXPECT_TRUE(detail::same_dense_layout(one_by_one, at::empty_strided({64, 32, 1, 1}, {32, 1, 7, 9})));
  const at::Tensor three = torch::randn({64, 32, 3, 3});
  EXPECT_FALSE(detail::same_dense_layout(three, three.contiguous(kChannelsLast)));
  EXPECT_TRUE(
      detail::same_dense_layout(three.contiguous(kChannelsLast), torch::zeros_like(three.contiguous(kChannelsLast))));
  EXPECT_FALSE(detail::same_dense_layout(torch::randn({4, 6}).t(), torch::randn({6, 4})));
  EXPECT_FALSE(detail::same_dense_layout(torch::randn({4, 8}).slice(1, 0, 8, 2), torch::randn({4, 4})));
  EXPECT_FALSE(detail::same_dense_layout(torch::randn({4, 4}), torch::randn({4, 5})));
}

TEST(CastWeights, RefusesWhatItCannotCast) {
  const at::Tensor w = torch::randn({4, 4});
  EXPECT_EQ(cast_weights_unsupported_reason({w}, at::kFloat), "a cast to Float (float16 or bfloat16 only)");
  EXPECT_EQ(cast_weights_unsupported_reason({w, w.to(at::kDouble)}, at::kHalf), "a weight in Double");
  EXPECT_EQ(cast_weights_unsupported_reason({w, at::Tensor()}, at::kHalf), "an undefined weight");
  EXPECT_EQ(cast_weights_unsupported_reason({w, w}, at::kBFloat16), "");
  EXPECT_THROW(cast_weights({w.to(at::kHalf)}, at::kHalf), std::invalid_argument);
  EXPECT_THROW(cast_weights({w}, at::kInt), std::invalid_argument);
}

}  // namespace
}  // namespace rn50::ops
