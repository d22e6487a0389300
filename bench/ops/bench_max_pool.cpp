// bench/ops/bench_max_pool.cpp: rn50_bench_max_pool, a benchmark (not a test): ResNet-50's stem max-pool (3x3,
// stride 2, padding 1 on [batch, 64, 112, 112] channels-last float16) as ATen's max_pool2d and as rn50's kernels,
// forward and forward+backward, each captured in a CUDA graph (bench/ops/graph_timing.h); one line each with the median
// milliseconds per call; then rn50's backward kernel alone in its two load orders; then the stem's BatchNorm+ReLU and
// max-pool, forward+backward on rn50's kernels, apart and fused (ops/max_pool.h's bn_relu_max_pool2d, fuse_stem_pool).
#include <ATen/cuda/CUDAContext.h>
#include <torch/torch.h>

#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

#include "bench/ops/graph_timing.h"
#include "cuda/device_ops.h"
#include "ops/fused_batch_norm.h"
#include "ops/max_pool.h"
#include "ops/max_pool_kernels.h"

namespace {

using rn50::ops::kStemMaxPool;
using rn50::test::time_calls;
using rn50::test::Timing;

constexpr int kRepeats = 30;  // graph replays; the median is printed

at::Tensor pool(const at::Tensor& x, bool own) {
  return own ? rn50::ops::max_pool2d(x, kStemMaxPool) : at::max_pool2d(x, {3, 3}, {2, 2}, {1, 1}, {1, 1}, false);
}

// rn50's backward kernel alone in its two forms (PoolPlan::gradients_with_positions): each covering output's gradient
// loaded only once its position says it is needed, or with the positions. Same sums, so the same input gradients.
// Each form is timed twice, the order alternating (default, eager, eager, default), so that drift in clocks or
// temperature favours neither; the mean of its two medians is printed.
void backward_kernel_variants(const std::vector<at::Tensor>& x, const std::vector<at::Tensor>& dy, int sets) {
  namespace k = rn50::ops::kernels;
  k::PoolShape s;
  s.n = x[0].size(0), s.c = x[0].size(1), s.h = x[0].size(2), s.w = x[0].size(3);
  s.kh = s.kw = 3, s.sh = s.sw = 2, s.ph = s.pw = 1;
  const cudaStream_t stream = at::cuda::getCurrentCUDAStream().stream();
  std::vector<at::Tensor> positions, dx;
  for (int i = 0; i < sets; ++i) {
    positions.push_back(at::empty(dy[i].sizes(), dy[i].options().dtype(at::kByte), at::MemoryFormat::ChannelsLast));
    const at::Tensor y = at::empty_like(dy[i]);
    k::PoolPlan p = k::make_pool_plan(s, 2, true);
    k::max_pool_forward<__half>(p, static_cast<const __half*>(x[i].data_ptr()), static_cast<__half*>(y.data_ptr()),
                                static_cast<uint8_t*>(positions[i].data_ptr()), stream);
  }
  std::vector<at::Tensor> results;
  double seconds[2] = {0, 0};
  for (const bool eager : {false, true, true, false}) {
    k::PoolPlan p = k::make_pool_plan(s, 2, true);
    p.gradients_with_positions = eager;
    dx.assign(static_cast<size_t>(sets), at::Tensor());
    for (int i = 0; i < sets; ++i) dx[i] = at::empty_like(x[i]);
    const Timing t = time_calls(
        [&](int i) {
          k::max_pool_backward<__half>(p, static_cast<const __half*>(dy[i].data_ptr()),
                                       static_cast<const uint8_t*>(positions[i].data_ptr()),
                                       static_cast<__half*>(dx[i].data_ptr()), stream);
        },
        sets, kRepeats);
    seconds[eager] += t.seconds / 2;
    results.push_back(dx[0].clone());
  }
  std::printf(
      "rn50 backward kernel: gradients after their positions %.3f ms, with them %.3f ms (%.2fx); input "
      "gradients %s\n",
      seconds[0] * 1e3, seconds[1] * 1e3, seconds[0] / seconds[1],
      torch::equal(results[0], results[1]) ? "equal" : "DIFFER");
}

// The stem's BatchNorm (training) + ReLU + max-pool on a convolution-like x, forward and the gradients of x, weight and
// bias: the ops apart (batch_norm_act, then max_pool2d) against the fused op, each on rn50's kernels.
void stem_norm_pool(int64_t batch, int sets) {
  const auto f = torch::TensorOptions().device(torch::kCUDA);
  std::vector<at::Tensor> x, dy;
  for (int i = 0; i < sets; ++i) {
    x.push_back((torch::randn({batch, 64, 112, 112}, f) + torch::randn({1, 64, 1, 1}, f))
                    .to(at::kHalf)
                    .contiguous(at::MemoryFormat::ChannelsLast)
                    .requires_grad_(true));
    dy.push_back(torch::randn({batch, 64, 56, 56}, f.dtype(at::kHalf)).contiguous(at::MemoryFormat::ChannelsLast));
  }
  rn50::ops::BatchNormState bn;
  bn.weight = (torch::rand({64}, f) + 0.5).requires_grad_(true);
  bn.bias = (torch::randn({64}, f) * 0.1).requires_grad_(true);
  bn.running_mean = torch::zeros({64}, f);
  bn.running_var = torch::ones({64}, f);
  bn.num_batches_tracked = torch::zeros({}, f.dtype(at::kLong));
  const auto run = [&](int i, bool fused) {
    const at::Tensor y =
        fused ? rn50::ops::bn_relu_max_pool2d(x[i], bn, kStemMaxPool, rn50::ops::BnKernels::kOwn)
              : rn50::ops::max_pool2d(rn50::ops::batch_norm_act(x[i], bn, {}, true, rn50::ops::BnKernels::kOwn),
                                      kStemMaxPool);
    return torch::autograd::grad({y}, {x[i], bn.weight, bn.bias}, {dy[i]});
  };
  const std::string why =
      rn50::ops::bn_relu_max_pool_unsupported_reason(x[0], bn, kStemMaxPool, rn50::ops::BnKernels::kOwn);
  if (!why.empty()) throw std::runtime_error("the fused stem op does not run here: " + why);
  const std::vector<at::Tensor> apart = run(0, false), fused = run(0, true);
  const auto relative = [](const at::Tensor& a, const at::Tensor& b) {
    return ((a.to(at::kDouble) - b.to(at::kDouble)).norm() / b.to(at::kDouble).norm()).item<double>();
  };
  double seconds[2] = {0, 0};
  bool graphs = true;
  for (const bool f2 : {false, true, true, false}) {  // each timed twice, alternating
    const Timing t = time_calls([&](int i) { run(i, f2); }, sets, kRepeats);
    seconds[f2] += t.seconds / 2;
    graphs = graphs && t.graph;
  }
  std::printf(
      "stem BatchNorm+ReLU+max-pool, forward+backward on rn50's kernels: apart %.3f ms, fused %.3f ms (%.2fx)%s; "
      "fused against apart, relative: dx %.2e, dweight %.2e, dbias %.2e\n",
      seconds[0] * 1e3, seconds[1] * 1e3, seconds[0] / seconds[1],
      graphs ? "" : " (timed eagerly: capture failed, see stderr)", relative(fused[0], apart[0]),
      relative(fused[1], apart[1]), relative(fused[2], apart[2]));
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const int64_t batch = rn50::test::batch_option(argc, argv, "rn50_bench_max_pool");
    if (!torch::cuda::is_available()) {
      std::fprintf(stderr, "rn50_bench_max_pool: no CUDA device\n");
      return 1;
    }
    rn50::cuda::use_side_stream(0);  // capture refuses the default stream
    const auto opts = torch::TensorOptions().device(torch::kCUDA).dtype(at::kHalf);
    // Two input sets: at batch 256 each x is 411 MB, far beyond the L2, so no call finds the last one's data there.
    const int sets = 2;
    std::vector<at::Tensor> x, dy;
    for (int i = 0; i < sets; ++i) {
      // A stem's ReLU output: half of it zero.
      x.push_back(torch::randn({batch, 64, 112, 112}, opts)
                      .relu()
                      .contiguous(at::MemoryFormat::ChannelsLast)
                      .requires_grad_(true));
      dy.push_back(torch::randn({batch, 64, 56, 56}, opts).contiguous(at::MemoryFormat::ChannelsLast));
    }
    const std::string why = rn50::ops::max_pool_unsupported_reason(x[0], kStemMaxPool);
    if (!why.empty()) throw std::runtime_error("rn50's kernels do not take the stem here: " + why);
    {
      // The two agree before either is timed (tests/ops/test_max_pool_cuda.cpp checks much more).
      std::vector<at::Tensor> y, dx;
      for (const bool own : {false, true}) {
        y.push_back(pool(x[0], own));
        dx.push_back(torch::autograd::grad({y.back()}, {x[0]}, {dy[0]})[0]);
      }
      std::printf(
          "rn50_bench_max_pool: %s; [%lld, 64, 112, 112] float16 channels-last, 3x3 stride 2 padding 1; "
          "median of %d graph replays; outputs %s, input gradients %s\n",
          at::cuda::getCurrentDeviceProperties()->name, static_cast<long long>(batch), kRepeats,
          torch::equal(y[0], y[1]) ? "equal" : "DIFFER", torch::equal(dx[0], dx[1]) ? "equal" : "DIFFER");
    }
    Timing forward[2], both[2];
    for (const bool own : {false, true}) {
      forward[own] = time_calls(
          [&](int i) {
            torch::NoGradGuard no_grad;
            pool(x[i], own);
          },
          sets, kRepeats);
      both[own] = time_calls([&](int i) { torch::autograd::grad({pool(x[i], own)}, {x[i]}, {dy[i]}); }, sets, kRepeats);
      std::printf("%-20s forward %.3f ms, forward+backward %.3f ms%s\n",
                  own ? "rn50 max_pool2d:" : "ATen max_pool2d:", forward[own].seconds * 1e3, both[own].seconds * 1e3,
                  forward[own].graph && both[own].graph ? "" : " (timed eagerly: capture failed, see stderr)");
    }
    std::printf("rn50 against ATen: forward %.2fx, forward+backward %.2fx as fast\n",
                forward[0].seconds / forward[1].seconds, both[0].seconds / both[1].seconds);
    backward_kernel_variants(x, dy, sets);
    x.clear();
    dy.clear();
    stem_norm_pool(batch, sets);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rn50_bench_max_pool: %s\n", e.what());
    return 1;
  }
}
