// tests/ops/test_fused_layer_norm.cpp: add_layer_norm and scaled_residual on the CPU (ATen's path, whichever `fused`
// asks) against the ops the models ran before, bit for bit, with their gradients; argument checks and reasons.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <stdexcept>
#include <string>

#include "ops/fused_layer_norm.h"

namespace rn50::ops {
namespace {

TEST(FusedLayerNorm, OnTheCpuEqualsAddLayerNormAndCastExactlyWithGradients) {
  for (bool fused : {false, true}) {
    for (bool branch : {false, true}) {
      SCOPED_TRACE(std::string(fused ? "fused" : "aten") + (branch ? ", branch" : ""));
      const at::Tensor x = torch::randn({3, 5, 64}).requires_grad_(true);
      const at::Tensor b = branch ? torch::randn({3, 5, 64}).requires_grad_(true) : at::Tensor();
      const at::Tensor w = torch::randn({64}).requires_grad_(true), bias = torch::randn({64}).requires_grad_(true);
      const AddLayerNormOut out = add_layer_norm(x, b, w, bias, 1e-6, at::kFloat, fused);
      const at::Tensor s = branch ? x + b : x;
      const at::Tensor want = at::layer_norm(s, {64}, w, bias, 1e-6);
      EXPECT_TRUE(torch::equal(out.y, want));
      EXPECT_EQ(out.sum.defined(), branch);
      if (branch) {
        EXPECT_TRUE(torch::equal(out.sum, s));
      }
      const at::Tensor dy = torch::randn({3, 5, 64});
      const auto got = torch::autograd::grad({out.y}, {x, w, bias}, {dy});
      const auto ref = torch::autograd::grad({want}, {x, w, bias}, {dy});
      for (size_t i = 0; i < got.size(); ++i) EXPECT_TRUE(torch::equal(got[i], ref[i])) << i;
    }
  }
}

TEST(FusedLayerNorm, OutputDtypeIsTheCastTheNextProductWouldMake) {
  const at::Tensor x = torch::randn({4, 32});
  const at::Tensor w = torch::ones({32}), b = torch::zeros({32});
  const AddLayerNormOut out = add_layer_norm(x, {}, w, b, 1e-5, at::kBFloat16, true);
  EXPECT_EQ(out.y.scalar_type(), at::kBFloat16);
  EXPECT_TRUE(torch::equal(out.y, at::layer_norm(x, {32}, w, b, 1e-5).to(at::kBFloat16)));
}

TEST(FusedLayerNorm, RejectsInconsistentArgumentsWithOneLineMessages) {
  const at::Tensor x = torch::randn({4, 32});
  const at::Tensor w = torch::ones({32}), b = torch::zeros({32});
  EXPECT_THROW(add_layer_norm(x, {}, torch::ones({31}), b, 1e-5, at::kFloat, true), std::invalid_argument);
  EXPECT_THROW(add_layer_norm(x, torch::randn({4, 31}), w, b, 1e-5, at::kFloat, true), std::invalid_argument);
  EXPECT_THROW(add_layer_norm(at::Tensor(), {}, w, b, 1e-5, at::kFloat, true), std::invalid_argument);
  try {
    add_layer_norm(x, {}, w, torch::zeros({3}), 1e-5, at::kFloat, true);
    FAIL() << "no throw";
  } catch (const std::invalid_argument& e) {
    EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("32 elements"), std::string::npos);
  }
}

TEST(FusedLayerNorm, ReasonNamesTheCpu) {
  EXPECT_EQ(fused_layer_norm_unsupported_reason(torch::randn({2, 32}), {}, at::kFloat), "on the CPU");
}

TEST(FusedLayerNorm, ScaledResidualOnTheCpuIsTorchvisionsOrderExactly) {
  for (bool with_scale : {false, true}) {
    for (bool fused : {false, true}) {
      const at::Tensor x = torch::randn({3, 8, 4, 4}).contiguous(at::MemoryFormat::ChannelsLast).requires_grad_(true);
      const at::Tensor y = torch::randn({3, 4, 4, 8}).permute({0, 3, 1, 2}).requires_grad_(true);
      const at::Tensor g = torch::randn({8, 1, 1}).requires_grad_(true);
      const at::Tensor scale = with_scale ? torch::tensor({0.0f, 1.25f, 1.25f}) : at::Tensor();
      const at::Tensor out = scaled_residual(x, y, g, scale, fused);
      at::Tensor want = g * y;
      if (with_scale) want = want * scale.view({-1, 1, 1, 1});
      want = want + x;
      EXPECT_TRUE(torch::equal(out, want));
      const at::Tensor dout = torch::randn({3, 8, 4, 4});
      const auto got = torch::autograd::grad({out}, {x, y, g}, {dout});
      const auto ref = torch::autograd::grad({want}, {x, y, g}, {dout});
      for (size_t i = 0; i < got.size(); ++i) EXPECT_TRUE(torch::equal(got[i], ref[i])) << i;
    }
  }
  EXPECT_THROW(scaled_residual(torch::randn({2, 8, 3, 3}), torch::randn({2, 8, 3, 3}), torch::randn({7}), {}, true),
               std::invalid_argument);
}

}  // namespace
}  // namespace rn50::ops
