// tests/ops/test_max_pool.cpp: max_pool2d on the CPU (ATen's path) against torch's functional max_pool2d as the model
// runs it with fusion off, bit for bit, on fresh random inputs; its reasons and refusals.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <stdexcept>
#include <string>

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

}  // namespace
}  // namespace rn50::ops
