// tests/parallel/test_grad_sync.cpp: gradient buckets against a fake communicator: views, order, overlap, mean.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <set>
#include <vector>

#include "parallel/communicator.h"
#include "parallel/grad_sync.h"

namespace rn50::parallel {
namespace {

// A world of two whose other rank always holds twice this rank's values: the mean is 1.5x the local value.
class FakeTwoRanks final : public Communicator {
 public:
  std::string backend() const override { return "fake"; }
  std::function<void()> start_mean(at::Tensor tensor) override {
    started.push_back(tensor.data_ptr());
    return [tensor]() mutable { tensor.mul_(1.5); };
  }
  void sum(at::Tensor tensor) override { tensor.mul_(3); }
  void broadcast_from_rank0(std::vector<at::Tensor>) override {}
  void shutdown() override {}
  std::vector<void*> started;
};

struct Net : torch::nn::Module {
  // The unused layer comes first, so it lands in the last bucket (buckets hold parameters in reverse order):
  // buckets start strictly in index order, and one that never fills holds back those after it.
  Net() {
    unused = register_module("unused", torch::nn::Linear(7, 7));
    conv = register_module("conv", torch::nn::Conv2d(torch::nn::Conv2dOptions(3, 16, 3)));
    fc1 = register_module("fc1", torch::nn::Linear(16, 300));
    fc2 = register_module("fc2", torch::nn::Linear(300, 5));
  }
  torch::Tensor forward(const torch::Tensor& x) { return fc2(torch::relu(fc1(conv(x).mean({2, 3})))); }
  torch::nn::Conv2d conv{nullptr};
  torch::nn::Linear fc1{nullptr}, fc2{nullptr}, unused{nullptr};
};

TEST(GradientBuckets, GradientsAreAlignedViewsAveragedInBucketOrderDuringBackward) {
  torch::manual_seed(3);
  Net net, reference;
  {
    torch::NoGradGuard g;
    for (size_t i = 0; i < net.parameters().size(); ++i) reference.parameters()[i].copy_(net.parameters()[i]);
    // A channels-last weight keeps its layout in the bucket.
    net.conv->weight.set_data(net.conv->weight.contiguous(at::MemoryFormat::ChannelsLast));
  }
  FakeTwoRanks comm;
  // 4 KB buckets: fc1's weight (19 KB) fills one alone; the small tensors share.
  GradientBuckets buckets(net.parameters(), comm, 4096);
  ASSERT_GE(buckets.num_buckets(), 3);
  for (const auto& p : net.parameters()) {
    ASSERT_TRUE(p.grad().defined());
    // Each gradient starts 256 bytes into its bucket times a whole number.
    EXPECT_EQ(p.grad().storage_offset() * static_cast<int64_t>(p.grad().element_size()) % 256, 0);
    EXPECT_EQ(p.grad().strides(), p.strides());
  }
  const auto x = torch::randn({4, 3, 8, 8});
  for (int step = 0; step < 2; ++step) {
    comm.started.clear();
    buckets.zero_gradients();
    net.forward(x).square().mean().backward();
    // Every bucket whose gradients all arrived was started by the hooks, before finish(); only the one
    // holding the unused layer waits for finish().
    const size_t started_during_backward = comm.started.size();
    EXPECT_EQ(started_during_backward, static_cast<size_t>(buckets.num_buckets()) - 1) << "step " << step;
    buckets.finish();
    ASSERT_EQ(comm.started.size(), static_cast<size_t>(buckets.num_buckets()));
    // Buckets start in index order: first the one holding the last parameters (fc2), last the one holding
    // the first (the unused layer, which only finish() starts).
    auto bucket_of = [](const at::Tensor& p) { return p.grad().storage().data(); };
    EXPECT_EQ(comm.started.front(), bucket_of(net.fc2->bias));
    EXPECT_EQ(comm.started.back(), bucket_of(net.unused->weight));
    EXPECT_EQ(std::set<void*>(comm.started.begin(), comm.started.end()).size(), comm.started.size());
    reference.zero_grad();
    reference.forward(x).square().mean().backward();
    for (size_t i = 0; i < net.parameters().size(); ++i) {
      const auto& got = net.parameters()[i].grad();
      const auto& want = reference.parameters()[i].grad();
      if (!want.defined()) {
        EXPECT_EQ(got.abs().max().item<float>(), 0.0f);  // a parameter the step did not reach: zero
        continue;
      }
      EXPECT_TRUE(torch::allclose(got, want * 1.5, 1e-5, 1e-7)) << net.named_parameters()[i].key();
    }
  }
}

}  // namespace
}  // namespace rn50::parallel
