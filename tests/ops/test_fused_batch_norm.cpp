// tests/ops/test_fused_batch_norm.cpp: batch_norm_act on the CPU (ATen's path) against torch::nn::BatchNorm2d + add_ +
// relu_ as the model runs them, bit for bit, on fresh random inputs; its argument checks and reasons.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <string>

#include "ops/fused_batch_norm.h"
#include "tests/support/error_of.h"

namespace rn50::ops {
namespace {

struct Setup {
  bool residual, relu, training;
  at::MemoryFormat format;
};

std::string name_of(const Setup& s) {
  return std::string(s.residual ? "residual" : "no residual") + (s.relu ? ", relu" : ", no relu") +
         (s.training ? ", train" : ", eval") + (s.format == at::MemoryFormat::ChannelsLast ? ", channels-last" : "");
}

// A module and a BatchNormState with the same random parameters and statistics, in separate tensors, so that each
// side's in-place updates can be compared.
struct Twins {
  torch::nn::BatchNorm2d module{nullptr};
  BatchNormState state;
};

Twins make_twins(int64_t channels, double momentum, double eps, bool training) {
  Twins t;
  t.module = torch::nn::BatchNorm2d(torch::nn::BatchNorm2dOptions(channels).momentum(momentum).eps(eps));
  {
    torch::NoGradGuard no_grad;
    t.module->weight.copy_(torch::randn({channels}));
    t.module->bias.copy_(torch::randn({channels}));
    t.module->running_mean.copy_(torch::randn({channels}));
    t.module->running_var.copy_(torch::rand({channels}) + 0.5);
    t.module->num_batches_tracked.fill_(7);
  }
  t.module->train(training);
  t.state.weight = t.module->weight.detach().clone().requires_grad_(true);
  t.state.bias = t.module->bias.detach().clone().requires_grad_(true);
  t.state.running_mean = t.module->running_mean.clone();
  t.state.running_var = t.module->running_var.clone();
  t.state.num_batches_tracked = t.module->num_batches_tracked.clone();
  t.state.momentum = momentum;
  t.state.eps = eps;
  t.state.training = training;
  return t;
}

void expect_same(const at::Tensor& a, const at::Tensor& b, const std::string& what) {
  ASSERT_TRUE(a.defined()) << what;
  ASSERT_TRUE(b.defined()) << what;
  EXPECT_EQ(a.sizes(), b.sizes()) << what;
  EXPECT_TRUE(torch::equal(a, b)) << what << ": largest difference " << (a - b).abs().max().item<double>();
}

// Exact: on the CPU both sides run the same ATen ops in the same order (batch_norm, add_, relu_).
void check(const Setup& s, BnKernels kernels) {
  SCOPED_TRACE(name_of(s) + ", kernels " + to_string(kernels));
  const int64_t n = 3, c = 5, h = 4, w = 6;
  Twins t = make_twins(c, /*momentum=*/0.3, /*eps=*/1e-3, s.training);
  const at::Tensor x0 = (torch::randn({n, c, h, w}) * 2 + 0.5).contiguous(s.format);
  const at::Tensor r0 = torch::randn({n, c, h, w}).contiguous(s.format);
  const at::Tensor dy = torch::randn({n, c, h, w});

  const at::Tensor x_ref = x0.clone().requires_grad_(true), x = x0.clone().requires_grad_(true);
  const at::Tensor r_ref = r0.clone().requires_grad_(true), r = r0.clone().requires_grad_(true);
  at::Tensor y_ref = t.module->forward(x_ref);
  if (s.residual) y_ref.add_(r_ref);
  if (s.relu) y_ref.relu_();
  const at::Tensor y = batch_norm_act(x, t.state, s.residual ? r : at::Tensor(), s.relu, kernels);

  expect_same(y, y_ref, "output");
  y_ref.backward(dy);
  y.backward(dy);
  expect_same(x.grad(), x_ref.grad(), "x gradient");
  expect_same(t.state.weight.grad(), t.module->weight.grad(), "weight gradient");
  expect_same(t.state.bias.grad(), t.module->bias.grad(), "bias gradient");
  if (s.residual) {
    expect_same(r.grad(), r_ref.grad(), "residual gradient");
  } else {
    EXPECT_FALSE(r.grad().defined());
  }
  expect_same(t.state.running_mean, t.module->running_mean, "running_mean");
  expect_same(t.state.running_var, t.module->running_var, "running_var");
  expect_same(t.state.num_batches_tracked, t.module->num_batches_tracked, "num_batches_tracked");
  EXPECT_EQ(t.state.num_batches_tracked.item<int64_t>(), s.training ? 8 : 7);
}

TEST(FusedBatchNorm, OnTheCpuEqualsTheModuleAddAndReluExactly) {
  for (bool training : {true, false}) {
    for (bool residual : {false, true}) {
      for (bool relu : {false, true}) {
        check({residual, relu, training, at::MemoryFormat::Contiguous}, BnKernels::kAuto);
      }
    }
  }
}

TEST(FusedBatchNorm, OnTheCpuEveryKernelChoiceAndLayoutTakesAtensPath) {
  for (BnKernels k : {BnKernels::kAuto, BnKernels::kCudnn, BnKernels::kOwn, BnKernels::kAten}) {
    check({true, true, true, at::MemoryFormat::ChannelsLast}, k);
    check({false, true, true, at::MemoryFormat::Contiguous}, k);
  }
}

TEST(FusedBatchNorm, RunningStatisticsFollowPyTorchsFormula) {
  // momentum 1: the running statistics become the batch's mean and unbiased variance (float64 reference;
  // 1e-5 relative covers float accumulation over 3 * 4 * 6 values).
  Twins t = make_twins(4, /*momentum=*/1.0, /*eps=*/1e-5, true);
  const at::Tensor x = torch::randn({3, 4, 4, 6}) * 3 + 10;
  batch_norm_act(x, t.state, at::Tensor(), true);
  const at::Tensor xd = x.to(at::kDouble);
  const at::Tensor mean = xd.mean({0, 2, 3});
  const at::Tensor var = xd.var({0, 2, 3}, /*unbiased=*/true);
  EXPECT_TRUE(torch::allclose(t.state.running_mean.to(at::kDouble), mean, 1e-5, 1e-6));
  EXPECT_TRUE(torch::allclose(t.state.running_var.to(at::kDouble), var, 1e-5, 1e-6));
}

TEST(FusedBatchNorm, WithoutRunningStatisticsOrAffineItNormalisesLikeTheModule) {
  auto module = torch::nn::BatchNorm2d(torch::nn::BatchNorm2dOptions(3).affine(false).track_running_stats(false));
  module->eval();  // without running statistics the module still uses the batch's
  BatchNormState state;
  state.training = false;
  const at::Tensor x = torch::randn({2, 3, 5, 5});
  expect_same(batch_norm_act(x, state, at::Tensor(), false), module->forward(x), "output");
}

TEST(FusedBatchNorm, RejectsInconsistentArgumentsWithOneLineMessages) {
  Twins t = make_twins(4, 0.1, 1e-5, true);
  const auto message_of = rn50::testing::error_of<std::invalid_argument>;
  const std::string one_value = message_of([&] { batch_norm_act(torch::randn({1, 4, 1, 1}), t.state, {}, true); });
  EXPECT_NE(one_value.find("more than one value per channel"), std::string::npos) << one_value;
  const std::string not_4d = message_of([&] { batch_norm_act(torch::randn({2, 4, 5}), t.state, {}, true); });
  EXPECT_NE(not_4d.find("4-D"), std::string::npos) << not_4d;
  const std::string bad_residual = message_of([&] {
    batch_norm_act(torch::randn({2, 4, 3, 3}), t.state, torch::randn({2, 4, 3, 2}), true);
  });
  EXPECT_NE(bad_residual.find("residual"), std::string::npos) << bad_residual;
  const std::string bad_channels = message_of([&] { batch_norm_act(torch::randn({2, 5, 3, 3}), t.state, {}, true); });
  EXPECT_NE(bad_channels.find("5 channels"), std::string::npos) << bad_channels;
  for (const std::string& m : {one_value, not_4d, bad_residual, bad_channels}) {
    EXPECT_EQ(m.find('\n'), std::string::npos) << m;
  }
  // One value per channel is fine in evaluation, as in torch::nn::BatchNorm2d.
  t.state.training = false;
  EXPECT_EQ(batch_norm_act(torch::randn({1, 4, 1, 1}), t.state, {}, true).sizes(), (at::IntArrayRef{1, 4, 1, 1}));
}

TEST(FusedBatchNorm, ReasonsNameTheCpu) {
  const at::Tensor x = torch::randn({2, 8, 3, 3}).contiguous(at::MemoryFormat::ChannelsLast);
  EXPECT_NE(fused_unsupported_reason(x).find("CPU"), std::string::npos) << fused_unsupported_reason(x);
  EXPECT_NE(describe_kernels(x, true, true).find("ATen"), std::string::npos) << describe_kernels(x, true, true);
  EXPECT_NE(cudnn_unsupported_reason(x, false, true).find("CPU"), std::string::npos);
  EXPECT_EQ(describe_kernels(x, false, true, BnKernels::kAten), "ATen (asked for)");
  EXPECT_STREQ(to_string(BnKernels::kOwn), "rn50");
}

}  // namespace
}  // namespace rn50::ops
