// tests/ops/test_max_pool.cpp: max_pool2d on the CPU (ATen's path) against torch's functional max_pool2d as the model
// runs it with fusion off, bit for bit, on fresh random inputs; bn_relu_max_pool2d's path apart against torch's
// BatchNorm2d, relu and max_pool2d; their reasons and refusals.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <stdexcept>
#include <string>

#include "models/blocks.h"
#include "ops/max_pool.h"

namespace rn50::ops {
namespace {

namespace F = torch::nn::functional;

TEST(MaxPool, AtenPathEqualsTorchsMaxPoolWithItsGradient) {
  const MaxPool2d pools[] = {kStemMaxPool, {2, 2, 2, 2, 0, 0}, {3, 2, 1, 2, 1, 0}};
  for (const MaxPool2d& p : pools) {
    for (const auto format : {at::MemoryFormat::Contiguous, at::MemoryFormat::ChannelsLast}) {
      // Ties: rounded values, many of them zero after the ReLU.
      const at::Tensor x0 = (torch::randn({3, 5, 11, 8}) * 2).round().relu().contiguous(format);
      const at::Tensor x = x0.clone().requires_grad_(true), xr = x0.clone().requires_grad_(true);
      const at::Tensor y = max_pool2d(x, p);
      const at::Tensor want = F::max_pool2d(xr, F::MaxPool2dFuncOptions({p.kernel_h, p.kernel_w})
                                                    .stride({p.stride_h, p.stride_w})
                                                    .padding({p.pad_h, p.pad_w}));
      EXPECT_TRUE(torch::equal(y, want));
      const at::Tensor dy = torch::randn_like(want);
      y.backward(dy);
      want.backward(dy);
      EXPECT_TRUE(torch::equal(x.grad(), xr.grad()));
    }
  }
}

TEST(MaxPool, SaysWhyItRunsAten) {
  const at::Tensor x = torch::randn({2, 64, 8, 8}).contiguous(at::MemoryFormat::ChannelsLast);
  EXPECT_EQ(max_pool_unsupported_reason(x, kStemMaxPool), "on the CPU");
  EXPECT_EQ(describe_max_pool(x, kStemMaxPool), "ATen (on the CPU)");
  EXPECT_THROW(max_pool2d_positions(x, kStemMaxPool), std::invalid_argument);
  EXPECT_THROW(max_pool2d(at::Tensor(), kStemMaxPool), std::invalid_argument);
  // A window torch refuses gets torch's error.
  EXPECT_THROW(max_pool2d(x, MaxPool2d{3, 3, 2, 2, 2, 2}), c10::Error);
}

using models::state_of;  // the model's own view of a BatchNorm module

// Where the fused kernels do not run (here: the CPU) the op is BatchNorm2d, relu and max_pool2d: outputs, every
// gradient and the running statistics equal torch's modules', in training and in evaluation.
TEST(BnReluMaxPool, PathApartEqualsTorchsModules) {
  for (const bool training : {true, false}) {
    torch::nn::BatchNorm2d ours(6), theirs(6);
    {
      torch::NoGradGuard no_grad;
      for (auto* bn : {&ours, &theirs}) {
        (*bn)->weight.copy_(torch::linspace(-1.5, 2.0, 6));
        (*bn)->bias.copy_(torch::linspace(0.5, -0.5, 6));
        (*bn)->running_mean.copy_(torch::linspace(-0.2, 0.3, 6));
        (*bn)->running_var.copy_(torch::linspace(0.5, 2.0, 6));
      }
    }
    ours->train(training);
    theirs->train(training);
    const at::Tensor x0 = torch::randn({3, 6, 9, 10}).contiguous(at::MemoryFormat::ChannelsLast);
    const at::Tensor x = x0.clone().requires_grad_(true), xr = x0.clone().requires_grad_(true);
    EXPECT_NE(bn_relu_max_pool_unsupported_reason(x, state_of(ours), kStemMaxPool), "");
    const at::Tensor y = bn_relu_max_pool2d(x, state_of(ours), kStemMaxPool);
    const at::Tensor want =
        F::max_pool2d(theirs->forward(xr).relu(), F::MaxPool2dFuncOptions(3).stride(2).padding(1));
    EXPECT_TRUE(torch::equal(y, want)) << training;
    const at::Tensor dy = torch::randn_like(want);
    y.backward(dy);
    want.backward(dy);
    EXPECT_TRUE(torch::equal(x.grad(), xr.grad())) << training;
    EXPECT_TRUE(torch::equal(ours->weight.grad(), theirs->weight.grad())) << training;
    EXPECT_TRUE(torch::equal(ours->bias.grad(), theirs->bias.grad())) << training;
    EXPECT_TRUE(torch::equal(ours->running_mean, theirs->running_mean)) << training;
    EXPECT_TRUE(torch::equal(ours->running_var, theirs->running_var)) << training;
    EXPECT_EQ(ours->num_batches_tracked.item<int64_t>(), training ? 1 : 0);
  }
}

TEST(BnReluMaxPool, SaysWhyItRunsTheOpsApart) {
  torch::nn::BatchNorm2d bn(4);
  const at::Tensor x = torch::randn({2, 4, 8, 8}).contiguous(at::MemoryFormat::ChannelsLast);
  EXPECT_EQ(bn_relu_max_pool_unsupported_reason(x, state_of(bn), kStemMaxPool), "on the CPU");
  EXPECT_EQ(bn_relu_max_pool_unsupported_reason(x, state_of(bn), kStemMaxPool, BnKernels::kCudnn),
            "bn_kernels: cudnn");
  BatchNormState evaluation = state_of(bn);
  evaluation.training = false;
  EXPECT_EQ(bn_relu_max_pool_unsupported_reason(x, evaluation, kStemMaxPool), "evaluation");
  // The BatchNorm's own argument checks, whichever path would run.
  EXPECT_THROW(bn_relu_max_pool2d(torch::randn({2, 5, 8, 8}), state_of(bn), kStemMaxPool), std::invalid_argument);
  EXPECT_THROW(bn_relu_max_pool2d(at::Tensor(), state_of(bn), kStemMaxPool), std::invalid_argument);
}

}  // namespace
}  // namespace rn50::ops
