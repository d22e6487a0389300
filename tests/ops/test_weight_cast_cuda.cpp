// tests/ops/test_weight_cast_cuda.cpp (GPU machine only): cast_weights on a CUDA device (the multi-tensor kernel, 64
// tensors a launch) against w.to(dtype) and grad.to(float32) per tensor, bit for bit, on fresh random weights, float16
// and bfloat16: more weights than one launch takes, sizes that end inside a vector and a chunk, values past float16's
// range, alone and mixed with a misaligned view and a strided one (those two copied one by one); eager and replayed
// from a CUDA graph on new values.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <vector>

#include "cuda/device_ops.h"
#include "ops/weight_cast.h"
#include "tests/support/cuda_test.h"

namespace rn50::ops {
namespace {

constexpr auto kChannelsLast = at::MemoryFormat::ChannelsLast;

class CastWeightsCuda : public test::CudaTest {};

// 150 weights: ResNet-like 4-D ones channels-last, odd sizes, large values that overflow float16, and unless
// `aligned_only`, views 4 bytes into a buffer (misaligned for 16-byte accesses) and strided ones (not dense).
std::vector<at::Tensor> fresh_weights(bool aligned_only) {
  const auto f = at::TensorOptions(at::kCUDA).dtype(at::kFloat);
  std::vector<at::Tensor> w;
  const int64_t odd[] = {1, 7, 9, 8191, 8193, 3 * 8192 + 5};
  for (int i = 0; i < 150; ++i) {
    switch (aligned_only && (i % 5 == 2 || i % 5 == 3) ? 1 : i % 5) {
      case 0:
        w.push_back(at::randn({64, 16 + i, 3, 3}, f).contiguous(kChannelsLast));
        break;
      case 1:
        w.push_back(at::randn({odd[i % 6]}, f));
        break;
      case 2:
        w.push_back(at::randn({4096 + i}, f).narrow(0, 1, 4000));  // dense, 4 bytes off alignment
        break;
      case 3:
        w.push_back(at::randn({256, 2 * (i + 1)}, f).slice(1, 0, 2 * (i + 1), 2));  // every other column
        break;
      default:
        w.push_back(at::randn({32, 64, 1, 1}, f).contiguous(kChannelsLast) * 3e4);  // some past 65504
    }
  }
  for (at::Tensor& t : w) t.requires_grad_(true);
  return w;
}

// The copies in g's dtype and the float32 gradients for the gradients `g`, through cast_weights.
std::vector<at::Tensor> run(const std::vector<at::Tensor>& weights, const std::vector<at::Tensor>& g) {
  const std::vector<at::Tensor> copies = cast_weights(weights, g.front().scalar_type());
  std::vector<at::Tensor> got = torch::autograd::grad(copies, weights, g);
  got.insert(got.begin(), copies.begin(), copies.end());
  return got;
}

void expect_each_tensors_casts(bool aligned_only, at::ScalarType dtype) {
  at::manual_seed(21);
  const std::vector<at::Tensor> weights = fresh_weights(aligned_only);
  std::vector<at::Tensor> g;
  for (const at::Tensor& w : weights) g.push_back(at::randn_like(w).to(dtype));
  const std::vector<at::Tensor> got = run(weights, g);
  const size_t n = weights.size();
  int overflowed = 0;
  for (size_t i = 0; i < n; ++i) {
    const at::Tensor want = weights[i].detach().to(dtype);
    overflowed += want.isinf().sum().item<int>();
    EXPECT_TRUE(at::equal(got[i], want)) << "copy " << i;
    EXPECT_EQ(got[n + i].scalar_type(), at::kFloat);
    if (weights[i].is_non_overlapping_and_dense()) {  // a strided weight's copy is a contiguous one
      EXPECT_EQ(got[i].strides(), weights[i].strides()) << i;
      EXPECT_EQ(got[n + i].strides(), weights[i].strides()) << i;
    }
    EXPECT_TRUE(at::equal(got[n + i], g[i].to(at::kFloat))) << "gradient " << i;
  }
  if (dtype == at::kHalf) EXPECT_GT(overflowed, 0);  // the large weights did reach infinity, in both paths alike
}

TEST_F(CastWeightsCuda, KernelsGiveEachTensorsCastsBitForBit) {
  for (const at::ScalarType dtype : {at::kHalf, at::kBFloat16}) {
    SCOPED_TRACE(c10::toString(dtype));
    expect_each_tensors_casts(true, dtype);   // every launch 8 elements a vector
    expect_each_tensors_casts(false, dtype);  // misaligned and strided views beside them, copied on their own
  }
}

TEST_F(CastWeightsCuda, ReplayedFromAGraphConvertsTheNewValues) {
  at::manual_seed(22);
  const std::vector<at::Tensor> weights = fresh_weights(false);
  std::vector<at::Tensor> g;
  for (const at::Tensor& w : weights) g.push_back(at::zeros_like(w).to(at::kHalf));
  run(weights, g);  // eagerly first: the autograd engine's device thread and the kernels' modules start outside capture
  std::vector<at::Tensor> captured;
  cuda::CudaGraph graph;
  graph.capture([&] { captured = run(weights, g); });
  {
    torch::NoGradGuard no_grad;
    for (size_t i = 0; i < weights.size(); ++i) {
      weights[i].copy_(at::randn_like(weights[i]));
      g[i].copy_(at::randn_like(g[i]));
    }
  }
  graph.replay();
  const std::vector<at::Tensor> eager = run(weights, g);
  ASSERT_EQ(captured.size(), eager.size());
  for (size_t i = 0; i < eager.size(); ++i) EXPECT_TRUE(at::equal(captured[i], eager[i])) << i;
}

}  // namespace
}  // namespace rn50::ops
