// tests/ops/test_max_pool_cuda.cpp (GPU machine only): rn50's max_pool2d against ATen's on fresh random inputs:
// values, indices and gradients equal to ATen's CUDA kernel in every dtype, NaN and infinities as ATen's CPU kernel;
// every element written; capture and replay in a CUDA graph; the bytes kept for the backward; the fallbacks; the
// ResNet stem's start-up line. bn_relu_max_pool2d against BatchNorm+ReLU and the pool apart on rn50's kernels (values
// bit for bit, gradients within float rounding), replayed against eager bit for bit, and what it keeps.
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <cstdio>
#include <limits>
#include <string>
#include <vector>

#include "cuda/device_ops.h"
#include "models/model.h"
#include "ops/fused_batch_norm.h"
#include "models/blocks.h"
#include "ops/max_pool.h"
#include "ops/max_pool_kernels.h"
#include "tests/support/cuda_test.h"

namespace rn50::ops {
namespace {

constexpr auto kChannelsLast = at::MemoryFormat::ChannelsLast;

class MaxPoolCuda : public test::CudaTest {};

struct Shape {
  int64_t n, c, h, w;
};

std::string str(const Shape& s, const MaxPool2d& p, at::ScalarType t) {
  return std::string(c10::toString(t)) + " [" + std::to_string(s.n) + "," + std::to_string(s.c) + "," +
         std::to_string(s.h) + "," + std::to_string(s.w) + "] k" + std::to_string(p.kernel_h) + "x" +
         std::to_string(p.kernel_w) + " s" + std::to_string(p.stride_h) + "x" + std::to_string(p.stride_w) + " p" +
         std::to_string(p.pad_h) + "x" + std::to_string(p.pad_w);
}

// Values like a stem's ReLU output: many exact zeros and small integers (ties), the rest normal.
at::Tensor random_input(const Shape& s, at::ScalarType dtype) {
  const auto f = torch::TensorOptions().device(torch::kCUDA).dtype(torch::kFloat);
  const at::Tensor normal = torch::randn({s.n, s.c, s.h, s.w}, f);
  const at::Tensor pick = torch::rand({s.n, s.c, s.h, s.w}, f);
  const at::Tensor x = at::where(pick < 0.4, normal.relu(), at::where(pick < 0.7, (normal * 2).round(), normal));
  return x.to(dtype).contiguous(kChannelsLast);
}

at::Tensor random_gradient(const at::Tensor& y) {
  return torch::randn_like(y, y.options().dtype(at::kFloat)).to(y.scalar_type());
}

// ATen's flat indices (row * W + column of each output's max) from rn50's positions.
at::Tensor indices_of(const at::Tensor& positions, const MaxPool2d& p, int64_t width) {
  const auto l = positions.options().dtype(at::kLong);
  const at::Tensor pos = positions.to(at::kLong);
  const at::Tensor oy = torch::arange(positions.size(2), l).view({1, 1, -1, 1});
  const at::Tensor ox = torch::arange(positions.size(3), l).view({1, 1, 1, -1});
  const at::Tensor row = oy * p.stride_h - p.pad_h + pos.div(p.kernel_w, "floor");
  const at::Tensor col = ox * p.stride_w - p.pad_w + pos.remainder(p.kernel_w);
  return row * width + col;
}

struct Pooled {
  at::Tensor y, dx, indices;
};

// ATen's output alone: its shape, for a gradient of that shape.
at::Tensor aten_output(const at::Tensor& x, const MaxPool2d& p) {
  torch::NoGradGuard no_grad;
  return at::max_pool2d(x, {p.kernel_h, p.kernel_w}, {p.stride_h, p.stride_w}, {p.pad_h, p.pad_w}, {1, 1}, false);
}

// ATen's max_pool2d with indices and its gradient, on x's device.
Pooled aten_pool(const at::Tensor& x0, const MaxPool2d& p, const at::Tensor& dy) {
  const at::Tensor x = x0.detach().clone().requires_grad_(true);
  const auto [y, indices] = at::max_pool2d_with_indices(x, {p.kernel_h, p.kernel_w}, {p.stride_h, p.stride_w},
                                                        {p.pad_h, p.pad_w}, {1, 1}, false);
  return {y, torch::autograd::grad({y}, {x}, {dy.to(y.device())})[0], indices};
}

Pooled own_pool(const at::Tensor& x0, const MaxPool2d& p, const at::Tensor& dy) {
  const at::Tensor x = x0.detach().clone().requires_grad_(true);
  const at::Tensor y = max_pool2d(x, p);
  return {y, torch::autograd::grad({y}, {x}, {dy})[0],
          indices_of(max_pool2d_positions(x0, p).positions, p, x0.size(3))};
}

// Equal values, NaN where the other has NaN (torch::equal takes NaN for unequal).
bool same_values(const at::Tensor& a, const at::Tensor& b) {
  const at::Tensor an = a.isnan(), bn = b.isnan();
  return torch::equal(an, bn) && torch::equal(a.masked_fill(an, 0), b.masked_fill(bn, 0));
}

const std::vector<MaxPool2d> kPools = {
    kStemMaxPool,       {2, 2, 2, 2, 0, 0}, {3, 3, 1, 1, 1, 1}, {2, 2, 1, 1, 1, 1},
    {5, 5, 2, 2, 2, 2}, {3, 2, 2, 1, 1, 0}, {1, 1, 2, 2, 0, 0}, {2, 2, 3, 3, 0, 0},
};
// H and W odd and even, C no multiple of 8 (or 4), H = W = 1 and 2.
const std::vector<Shape> kShapes = {{4, 64, 28, 28},  {3, 24, 15, 13}, {2, 12, 9, 10}, {1, 7, 8, 7},
                                    {2, 100, 17, 17}, {4, 3, 33, 31},  {2, 64, 1, 1},  {5, 16, 2, 2}};

void expect_like_aten_cuda(const Shape& s, const MaxPool2d& p, at::ScalarType dtype) {
  const std::string what = str(s, p, dtype);
  SCOPED_TRACE(what);
  ASSERT_EQ(max_pool_unsupported_reason(random_input(s, dtype), p), "");
  const at::Tensor x = random_input(s, dtype);
  const at::Tensor dy = random_gradient(aten_output(x, p));
  const Pooled want = aten_pool(x, p, dy), got = own_pool(x, p, dy);
  EXPECT_EQ(got.y.scalar_type(), dtype);
  EXPECT_TRUE(got.y.is_contiguous(kChannelsLast));
  EXPECT_TRUE(got.dx.is_contiguous(kChannelsLast));
  const bool y_equal = torch::equal(got.y, want.y), indices_equal = torch::equal(got.indices, want.indices),
             dx_equal = torch::equal(got.dx, want.dx);
  EXPECT_TRUE(y_equal);
  EXPECT_TRUE(indices_equal) << (got.indices != want.indices).sum().item<int64_t>() << " of " << got.indices.numel();
  // Both sum in float in the same order and round once: equal in every dtype, not only float32.
  EXPECT_TRUE(dx_equal) << "largest difference " << (got.dx - want.dx).abs().max().item<double>();
  const double distinct = static_cast<double>(std::get<0>(at::_unique(x.flatten().to(at::kFloat))).size(0)) / x.numel();
  std::printf("[ aten cuda] %-46s y %s indices %s dx %s (%.0f%% of the inputs repeat a value)\n", what.c_str(),
              y_equal ? "equal" : "DIFFER", indices_equal ? "equal" : "DIFFER", dx_equal ? "equal" : "DIFFER",
              100.0 * (1.0 - distinct));
}

TEST_F(MaxPoolCuda, ValuesIndicesAndGradientsEqualAtensCudaKernel) {
  for (at::ScalarType dtype : {at::kHalf, at::kBFloat16, at::kFloat}) {
    expect_like_aten_cuda({32, 64, 112, 112}, kStemMaxPool, dtype);  // the stem at batch 32
    for (const Shape& s : kShapes) {
      for (const MaxPool2d& p : kPools) {
        if (max_pool_unsupported_reason(random_input(s, dtype), p).empty()) expect_like_aten_cuda(s, p, dtype);
      }
    }
  }
}

// NaN, +-inf and windows of nothing but -inf, against ATen's CPU kernel on the same values in float32 (exact for the
// 16-bit types; the CPU sums gradients in float in the same order, so rn50's rounded sums equal its rounded to the
// dtype). ATen's channels-last CUDA kernel differs only in -inf windows (flat index 0); the count is printed.
TEST_F(MaxPoolCuda, NanAndInfinityAsAtensCpuKernel) {
  for (at::ScalarType dtype : {at::kHalf, at::kBFloat16, at::kFloat}) {
    for (const Shape& s : {Shape{4, 64, 20, 20}, Shape{3, 12, 9, 11}}) {
      for (const MaxPool2d& p : {kStemMaxPool, MaxPool2d{2, 2, 1, 1, 1, 1}, MaxPool2d{5, 5, 2, 2, 2, 2}}) {
        const std::string what = str(s, p, dtype);
        SCOPED_TRACE(what);
        const auto f = torch::TensorOptions().device(torch::kCUDA).dtype(torch::kFloat);
        at::Tensor x = random_input(s, dtype).to(at::kFloat);
        const at::Tensor pick = torch::rand(x.sizes(), f);
        x = x.masked_fill(pick < 0.03, std::numeric_limits<float>::quiet_NaN())
                .masked_fill((pick >= 0.03) & (pick < 0.08), -std::numeric_limits<float>::infinity())
                .masked_fill((pick >= 0.08) & (pick < 0.09), std::numeric_limits<float>::infinity());
        x.select(0, 0).select(0, 1).fill_(-std::numeric_limits<float>::infinity());  // a whole -inf plane
        x.select(0, 1).narrow(1, 2, 5).narrow(2, 3, 6).fill_(-std::numeric_limits<float>::infinity());
        x = x.to(dtype).contiguous(kChannelsLast);
        const at::Tensor dy = random_gradient(aten_output(x, p));
        const Pooled got = own_pool(x, p, dy);
        const Pooled cpu = aten_pool(x.to(at::kFloat).cpu(), p, dy.to(at::kFloat).cpu());
        const Pooled cuda = aten_pool(x, p, dy);
        EXPECT_TRUE(same_values(got.y.to(at::kFloat).cpu(), cpu.y));
        EXPECT_TRUE(torch::equal(got.indices.cpu(), cpu.indices))
            << (got.indices.cpu() != cpu.indices).sum().item<int64_t>() << " of " << cpu.indices.numel();
        EXPECT_TRUE(same_values(got.dx.cpu(), cpu.dx.to(dtype)));
        EXPECT_GT(got.y.isnan().sum().item<int64_t>(), 0);
        EXPECT_GT(got.y.isneginf().sum().item<int64_t>(), 0);
        std::printf(
            "[ aten cpu ] %-46s equal; ATen's CUDA kernel: %lld indices and %lld gradients elsewhere\n", what.c_str(),
            static_cast<long long>((cuda.indices != got.indices).sum().item<int64_t>()),
            static_cast<long long>((~(cuda.dx == got.dx) & ~(cuda.dx.isnan() & got.dx.isnan())).sum().item<int64_t>()));
      }
    }
  }
}

// The kernels called directly on outputs the test filled first (NaN, 0xee): every element gets written, to the
// values the op returns.
TEST_F(MaxPoolCuda, KernelsWriteEveryElement) {
  for (const MaxPool2d& p : {kStemMaxPool, MaxPool2d{5, 5, 2, 2, 2, 2}}) {
    for (const Shape& s : {Shape{8, 64, 56, 56}, Shape{3, 12, 9, 11}}) {
      SCOPED_TRACE(str(s, p, at::kHalf));
      const at::Tensor x = random_input(s, at::kHalf);
      const MaxPoolForward want = max_pool2d_positions(x, p);
      const at::Tensor dy = random_gradient(want.y);
      const at::Tensor xg = x.clone().requires_grad_(true);
      const at::Tensor want_dx = torch::autograd::grad({max_pool2d(xg, p)}, {xg}, {dy})[0];
      const kernels::PoolPlan plan = kernels::make_pool_plan(max_pool_shape(x, p), 2, true);
      at::Tensor y = torch::full_like(want.y, std::numeric_limits<float>::quiet_NaN());
      at::Tensor positions = torch::full_like(want.positions, 0xee);
      at::Tensor dx = torch::full_like(want_dx, std::numeric_limits<float>::quiet_NaN());
      const cudaStream_t stream = at::cuda::getCurrentCUDAStream().stream();
      kernels::max_pool_forward<__half>(plan, static_cast<const __half*>(x.data_ptr()),
                                        static_cast<__half*>(y.data_ptr()), static_cast<uint8_t*>(positions.data_ptr()),
                                        stream);
      kernels::max_pool_backward<__half>(plan, static_cast<const __half*>(dy.contiguous(kChannelsLast).data_ptr()),
                                         static_cast<const uint8_t*>(positions.data_ptr()),
                                         static_cast<__half*>(dx.data_ptr()), stream);
      EXPECT_TRUE(torch::equal(y, want.y));
      EXPECT_TRUE(torch::equal(positions, want.positions));
      EXPECT_TRUE(torch::equal(dx, want_dx));
      EXPECT_EQ(positions.eq(0xee).sum().item<int64_t>(), 0);
    }
  }
}

TEST_F(MaxPoolCuda, CapturedForwardAndBackwardReplayLikeEager) {
  const Shape s{8, 64, 56, 56};
  const at::Tensor x = random_input(s, at::kHalf).requires_grad_(true);
  const at::Tensor dy = random_gradient(aten_output(x, kStemMaxPool));
  const auto step = [&] {
    const at::Tensor y = max_pool2d(x, kStemMaxPool);
    return std::vector<at::Tensor>{y, torch::autograd::grad({y}, {x}, {dy})[0]};
  };
  for (int warm = 0; warm < 2; ++warm) step();
  std::vector<at::Tensor> captured;
  cuda::CudaGraph graph;
  graph.capture([&] { captured = step(); });
  for (int replay = 0; replay < 3; ++replay) {
    {
      torch::NoGradGuard no_grad;
      x.copy_(random_input(s, at::kHalf));
      dy.copy_(random_gradient(dy));
    }
    graph.replay();
    const std::vector<at::Tensor> eager = step();
    const Pooled aten = aten_pool(x, kStemMaxPool, dy);
    EXPECT_TRUE(torch::equal(captured[0], eager[0])) << "y, replay " << replay;
    EXPECT_TRUE(torch::equal(captured[1], eager[1])) << "dx, replay " << replay;
    EXPECT_TRUE(torch::equal(captured[1], aten.dx)) << "dx against ATen, replay " << replay;
  }
}

size_t allocated_now() {
  return c10::cuda::CUDACachingAllocator::getDeviceStats(0)
      .allocated_bytes[static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE)]
      .current;
}

// What the forward keeps for the backward, besides its output: one byte per output (the positions), against the
// eight of ATen's int64 indices. Neither keeps more of x than the reference to x itself.
TEST_F(MaxPoolCuda, KeepsOneBytePerOutputForTheBackward) {
  const at::Tensor x = random_input({32, 64, 112, 112}, at::kHalf).requires_grad_(true);
  const int64_t outputs = 32 * 64 * 56 * 56;
  const size_t y_bytes = static_cast<size_t>(outputs) * 2, slack = 2u << 20;  // the allocator's rounding of a block
  size_t kept[2] = {};
  for (int own = 0; own < 2; ++own) {
    torch::cuda::synchronize();
    const size_t before = allocated_now();
    {
      const at::Tensor y = own ? max_pool2d(x, kStemMaxPool) : at::max_pool2d(x, {3, 3}, {2, 2}, {1, 1}, {1, 1}, false);
      torch::cuda::synchronize();
      kept[own] = allocated_now() - before - y_bytes;
    }
    std::printf("[ memory   ] %-4s keeps %.2f bytes per output for the backward (besides the output)\n",
                own ? "rn50" : "ATen", static_cast<double>(kept[own]) / outputs);
  }
  EXPECT_LE(kept[1], static_cast<size_t>(outputs) + slack);
  EXPECT_GE(kept[1], static_cast<size_t>(outputs));
  EXPECT_GE(kept[0], 8 * static_cast<size_t>(outputs));
}

TEST_F(MaxPoolCuda, GradientsInAnyLayoutAndABroadcastOne) {
  const Shape s{4, 16, 12, 12};
  const at::Tensor x = random_input(s, at::kFloat);
  const at::Tensor y0 = aten_output(x, kStemMaxPool);
  for (const at::Tensor& dy :
       {random_gradient(y0).contiguous(), torch::ones({1, 1, 1, 1}, y0.options()).expand_as(y0)}) {
    EXPECT_TRUE(torch::equal(own_pool(x, kStemMaxPool, dy).dx, aten_pool(x, kStemMaxPool, dy).dx));
  }
}

TEST_F(MaxPoolCuda, FallsBackToAtenAndSaysWhy) {
  const at::Tensor cl = random_input({2, 16, 10, 10}, at::kHalf);
  EXPECT_EQ(describe_max_pool(cl, kStemMaxPool), "rn50");
  const at::Tensor nchw = cl.contiguous();
  EXPECT_EQ(describe_max_pool(nchw, kStemMaxPool), "ATen (NCHW layout)");
  const at::Tensor dbl = cl.to(at::kDouble);
  EXPECT_EQ(describe_max_pool(dbl, kStemMaxPool), "ATen (dtype Double)");
  EXPECT_EQ(describe_max_pool(cl, MaxPool2d{17, 17, 1, 1, 8, 8}),
            "ATen (a window of more than 256 elements (positions are one byte))");
  const at::Tensor three_d = cl.select(0, 0);
  EXPECT_EQ(describe_max_pool(three_d, kStemMaxPool), "ATen (not a 4-D tensor)");
  // The fallbacks run ATen's op: its results, and its error for a window torch refuses.
  for (const at::Tensor& x : {nchw, dbl, three_d}) {
    const at::Tensor want = at::max_pool2d(x, {3, 3}, {2, 2}, {1, 1}, {1, 1}, false);
    EXPECT_TRUE(torch::equal(max_pool2d(x, kStemMaxPool), want)) << x.sizes();
  }
  EXPECT_THROW(max_pool2d(cl, MaxPool2d{3, 3, 2, 2, 2, 2}), c10::Error);
  EXPECT_THROW(max_pool2d_positions(nchw, kStemMaxPool), std::invalid_argument);
}

// The ResNet stem runs it under fusion: bn and conv, and the start-up line says so.
TEST_F(MaxPoolCuda, ResNetStemSaysItRunsRn50sKernels) {
  const at::Tensor images = torch::zeros({2, 3, 64, 64}, torch::TensorOptions().device(torch::kCUDA).dtype(at::kHalf))
                                .contiguous(kChannelsLast);
  for (const models::Fusion fusion : {models::Fusion::kBatchNorm, models::Fusion::kConv}) {
    models::ModelOptions options{10, false};
    options.fusion = fusion;
    const std::string line = models::create("resnet50", options)->describe_fusion(images);
    EXPECT_NE(line.find("stem max-pool: rn50"), std::string::npos) << line;
  }
}

TEST_F(MaxPoolCuda, ResNetStemSaysItsBatchNormRunsInThePool) {
  const at::Tensor images = torch::zeros({2, 3, 64, 64}, torch::TensorOptions().device(torch::kCUDA).dtype(at::kHalf))
                                .contiguous(kChannelsLast);
  models::ModelOptions options{10, false};
  options.fusion = models::Fusion::kConv;
  options.fuse_stem_pool = true;
  const std::string line = models::create("resnet50", options)->describe_fusion(images);
  EXPECT_NE(line.find("stem max-pool: rn50, with the stem's BatchNorm+ReLU (training)"), std::string::npos) << line;
}

// ---- bn_relu_max_pool2d ---------------------------------------------------------------------------------------------

// Two BatchNorms with the same random parameters and running statistics on the GPU.
struct TwinNorms {
  torch::nn::BatchNorm2d a{nullptr}, b{nullptr};
  explicit TwinNorms(int64_t c) : a(c), b(c) {
    a->to(torch::kCUDA);
    b->to(torch::kCUDA);
    torch::NoGradGuard no_grad;
    const auto f = torch::TensorOptions().device(torch::kCUDA);
    const at::Tensor w = torch::randn({c}, f), bias = torch::randn({c}, f) * 0.5, m = torch::randn({c}, f) * 0.2,
                     v = torch::rand({c}, f) + 0.5;
    for (auto* bn : {&a, &b}) {
      (*bn)->weight.copy_(w);
      (*bn)->bias.copy_(bias);
      (*bn)->running_mean.copy_(m);
      (*bn)->running_var.copy_(v);
    }
  }
};

using models::state_of;  // the model's own view of a BatchNorm module

// A stem's convolution output: normal values around a per-channel offset, so that ReLU zeroes a share of each.
at::Tensor conv_like(const Shape& s, at::ScalarType dtype) {
  const auto f = torch::TensorOptions().device(torch::kCUDA).dtype(torch::kFloat);
  return (torch::randn({s.n, s.c, s.h, s.w}, f) + torch::randn({1, s.c, 1, 1}, f)).to(dtype).contiguous(kChannelsLast);
}

// T's relative rounding step, and its step below the smallest normal value.
double rounding_of(at::ScalarType t) {
  return t == at::kHalf ? std::ldexp(1.0, -10) : t == at::kBFloat16 ? std::ldexp(1.0, -7) : std::ldexp(1.0, -23);
}
double subnormal_of(at::ScalarType t) {
  return t == at::kHalf ? std::ldexp(1.0, -24) : t == at::kBFloat16 ? std::ldexp(1.0, -133) : std::ldexp(1.0, -149);
}

// The largest excess of |got - want| over `tolerance` (<= 0: within it everywhere).
double excess(const at::Tensor& got, const at::Tensor& want, const at::Tensor& tolerance) {
  return ((got.to(at::kDouble) - want.to(at::kDouble)).abs() - tolerance).max().item<double>();
}

// Every output of the fused op against BatchNorm+ReLU (rn50's kernels) then the pool, in every dtype and on odd shapes
// (C not a multiple of 8): the pooled values and the running statistics bit for bit; the gradients within float
// rounding, since the fused op sums dweight and dbias over the pool's outputs in float where the ops apart sum each
// input's gradient rounded to T. From g, the pool's input gradient the ops apart computed, in float64: dbias and
// dweight within (T's step + 2e-5) of the sums of |g| and |g * xhat|; dx within two of T's steps of |weight * invstd *
// g| and of |dx|, plus (T's step + 2e-5) of its mean terms' magnitudes and one subnormal step.
TEST_F(MaxPoolCuda, BnReluPoolMatchesTheOpsApartOnRn50sKernels) {
  const std::vector<Shape> shapes = {{8, 64, 112, 112}, {3, 24, 15, 13}, {2, 12, 9, 10}, {4, 7, 8, 7}};
  for (const at::ScalarType dtype : {at::kHalf, at::kBFloat16, at::kFloat}) {
    for (const Shape& s : shapes) {
      const std::string what = str(s, kStemMaxPool, dtype);
      SCOPED_TRACE(what);
      TwinNorms bn(s.c);
      const at::Tensor x0 = conv_like(s, dtype);
      ASSERT_EQ(bn_relu_max_pool_unsupported_reason(x0, state_of(bn.a), kStemMaxPool, BnKernels::kOwn), "");
      const at::Tensor x = x0.clone().requires_grad_(true), xr = x0.clone().requires_grad_(true);
      const at::Tensor y = bn_relu_max_pool2d(x, state_of(bn.a), kStemMaxPool, BnKernels::kOwn);
      const at::Tensor normalised = batch_norm_act(xr, state_of(bn.b), {}, true, BnKernels::kOwn);
      const at::Tensor want = max_pool2d(normalised, kStemMaxPool);
      const at::Tensor dy = random_gradient(want);
      y.backward(dy);
      const at::Tensor g = torch::autograd::grad({want}, {normalised}, {dy}, /*retain_graph=*/true)[0];
      want.backward(dy);
      // The batch's statistics and the tolerances, in float64.
      const at::Tensor xd = x0.to(at::kDouble);
      const at::Tensor mean = xd.mean({0, 2, 3}, true);
      const at::Tensor invstd = ((xd - mean).pow(2).mean({0, 2, 3}, true) + bn.a->options.eps()).rsqrt();
      const at::Tensor xhat = (xd - mean) * invstd,
                       gd = (g * normalised.detach().gt(0)).to(at::kDouble);  // ReLU's mask
      const at::Tensor scale = bn.a->weight.detach().to(at::kDouble).view({1, -1, 1, 1}) * invstd;
      const double step = rounding_of(dtype) + 2e-5, m = static_cast<double>(s.n * s.h * s.w);
      const at::Tensor db_abs = gd.abs().sum({0, 2, 3}), dw_abs = (gd * xhat).abs().sum({0, 2, 3});
      const at::Tensor dx_apart = xr.grad();
      const at::Tensor dx_tolerance =
          2.0 * rounding_of(dtype) * ((scale * gd).abs() + dx_apart.to(at::kDouble).abs()) +
          step * scale.abs() * (db_abs.view({1, -1, 1, 1}) + xhat.abs() * dw_abs.view({1, -1, 1, 1})) / m +
          subnormal_of(dtype);
      const double dx_off = excess(x.grad(), dx_apart, dx_tolerance);
      const double dw_off = excess(bn.a->weight.grad(), bn.b->weight.grad(), step * dw_abs);
      const double db_off = excess(bn.a->bias.grad(), bn.b->bias.grad(), step * db_abs);
      const bool y_eq = torch::equal(y, want);
      EXPECT_TRUE(y_eq);
      EXPECT_LE(dx_off, 0.0);
      EXPECT_LE(dw_off, 0.0);
      EXPECT_LE(db_off, 0.0);
      EXPECT_TRUE(torch::equal(bn.a->running_mean, bn.b->running_mean));
      EXPECT_TRUE(torch::equal(bn.a->running_var, bn.b->running_var));
      EXPECT_EQ(bn.a->num_batches_tracked.item<int64_t>(), 1);
      EXPECT_TRUE(y.is_contiguous(kChannelsLast));
      const double zeros = want.eq(0).sum().item<double>() / want.numel();
      const auto relative = [](const at::Tensor& a, const at::Tensor& b) {
        return ((a.to(at::kDouble) - b.to(at::kDouble)).norm() / b.to(at::kDouble).norm()).item<double>();
      };
      std::printf(
          "[ bn pool  ] %-46s y %s; against the ops apart, relative: dx %.2e dweight %.2e dbias %.2e%s (%.0f%% "
          "of the outputs zero)\n",
          what.c_str(), y_eq ? "equal" : "DIFFER", relative(x.grad(), dx_apart),
          relative(bn.a->weight.grad(), bn.b->weight.grad()), relative(bn.a->bias.grad(), bn.b->bias.grad()),
          dx_off <= 0 && dw_off <= 0 && db_off <= 0 ? "" : " OUTSIDE THE TOLERANCE", 100.0 * zeros);
    }
  }
}

TEST_F(MaxPoolCuda, BnReluPoolCapturedReplaysLikeEager) {
  const Shape s{8, 64, 56, 56};
  TwinNorms bn(s.c);
  const at::Tensor x = conv_like(s, at::kHalf).requires_grad_(true);
  const at::Tensor dy = random_gradient(aten_output(x, kStemMaxPool));
  const auto step = [&](torch::nn::BatchNorm2d& norm) {
    const at::Tensor y = bn_relu_max_pool2d(x, state_of(norm), kStemMaxPool);
    std::vector<at::Tensor> out = torch::autograd::grad({y}, {x, norm->weight, norm->bias}, {dy});
    out.insert(out.begin(), y);
    return out;  // y, dx, dweight, dbias
  };
  for (int warm = 0; warm < 2; ++warm) step(bn.a);
  std::vector<at::Tensor> captured;
  cuda::CudaGraph graph;
  graph.capture([&] { captured = step(bn.a); });
  for (int replay = 0; replay < 3; ++replay) {
    {
      torch::NoGradGuard no_grad;
      x.copy_(conv_like(s, at::kHalf));
      dy.copy_(random_gradient(dy));
    }
    graph.replay();
    const std::vector<at::Tensor> eager = step(bn.b);
    EXPECT_TRUE(torch::equal(captured[0], eager[0])) << "y, replay " << replay;
    EXPECT_TRUE(torch::equal(captured[1], eager[1])) << "dx, replay " << replay;
    EXPECT_TRUE(torch::equal(captured[2], eager[2])) << "dweight, replay " << replay;
    EXPECT_TRUE(torch::equal(captured[3], eager[3])) << "dbias, replay " << replay;
  }
}

// The ops apart keep BatchNorm+ReLU's output (the size of x) for ReLU's backward and the pool's positions; the fused
// op the positions and x at each output's max (the size of y), and 1 MiB of slack for the allocator's rounding.
TEST_F(MaxPoolCuda, BnReluPoolKeepsNoNormalisedTensor) {
  const Shape s{16, 64, 112, 112};
  const at::Tensor x = conv_like(s, at::kHalf).requires_grad_(true);
  const int64_t outputs = s.n * s.c * 56 * 56;
  const size_t x_bytes = static_cast<size_t>(x.numel()) * 2, y_bytes = static_cast<size_t>(outputs) * 2;
  size_t kept[2] = {};
  for (int fused = 0; fused < 2; ++fused) {
    TwinNorms bn(s.c);
    torch::cuda::synchronize();
    const size_t before = allocated_now();
    {
      const at::Tensor y = fused ? bn_relu_max_pool2d(x, state_of(bn.a), kStemMaxPool, BnKernels::kOwn)
                                 : max_pool2d(batch_norm_act(x, state_of(bn.a), {}, true, BnKernels::kOwn),
                                              kStemMaxPool);
      torch::cuda::synchronize();
      kept[fused] = allocated_now() - before - y_bytes;
    }
    std::printf("[ memory   ] %-12s keeps %.2f MB for the backward (x is %.2f MB)\n", fused ? "fused" : "ops apart",
                kept[fused] / 1e6, x_bytes / 1e6);
  }
  EXPECT_GE(kept[0], x_bytes);
  EXPECT_LE(kept[1] + x_bytes, kept[0] + y_bytes + (size_t{1} << 20));
}

}  // namespace
}  // namespace rn50::ops
