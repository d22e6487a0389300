// tests/ops/test_fused_batch_norm_cuda.cpp (GPU machine only): the fused BatchNorm(+add)+ReLU, rn50's kernels and
// cuDNN's, against ATen's batch_norm in float64 on the same inputs, on fresh random inputs; the NCHW fallback; memory;
// a captured CUDA graph against eager. Prints each case's relative errors, so that the log shows the margins.
#include <c10/cuda/CUDACachingAllocator.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cstdio>
#include <string>
#include <vector>

#include "cuda/device_ops.h"
#include "ops/fused_batch_norm.h"
#include "tests/support/cuda_test.h"

namespace rn50::ops {
namespace {

constexpr auto kChannelsLast = at::MemoryFormat::ChannelsLast;

using test::rel_err;

class FusedBnCuda : public test::CudaTest {};

struct Shape {
  int64_t n, c, h, w;
};

std::string str(const Shape& s) {
  return "[" + std::to_string(s.n) + "," + std::to_string(s.c) + "," + std::to_string(s.h) + "," + std::to_string(s.w) +
         "]";
}

// ResNet-50's (at batch 32 and 8) and odd ones: batch 1 at 7x7, C = 3, 12, 100 (no multiple of 8), H*W = 1.
const std::vector<Shape> kShapes = {{32, 64, 56, 56}, {32, 256, 14, 14}, {8, 2048, 7, 7}, {1, 64, 7, 7},
                                    {4, 3, 9, 9},     {6, 12, 5, 5},     {3, 100, 6, 6},  {16, 64, 1, 1}};

const char* dtype_name(at::ScalarType t) {
  return t == at::kFloat ? "float32" : t == at::kHalf ? "float16" : "bfloat16";
}

// Norm-wise relative tolerances against float64: the output's rounding to the dtype (half 2^-11, bfloat16 2^-8
// per element) with room for float arithmetic; float32 for rounding of float statistics and float arithmetic.
double tol_output(at::ScalarType t) { return t == at::kFloat ? 1e-5 : t == at::kHalf ? 1e-3 : 8e-3; }
double tol_grad(at::ScalarType t) { return t == at::kFloat ? 1e-4 : t == at::kHalf ? 2e-3 : 1.5e-2; }
// Per-channel sums and statistics: float accumulation over up to 100,000 values of the same inputs (rn50's kernels
// combine their float partials in double; cuDNN's accumulation is its own, so it gets ten times the room, and fifty
// for 16-bit tensors: its ReLU mask comes from its rounded output, and the gradients of the few elements within
// rounding of zero move the sums; 1.6e-3 was seen for dbias at [8,2048,7,7] in half on the H200).
double tol_param(bool cudnn, at::ScalarType t) { return !cudnn ? 1e-4 : t == at::kFloat ? 1e-3 : 5e-3; }
double tol_stats(bool cudnn) { return cudnn ? 2e-4 : 2e-5; }

BatchNormState random_state(int64_t c, bool training, double momentum = 0.1) {
  const auto f = torch::TensorOptions().device(torch::kCUDA).dtype(torch::kFloat);
  BatchNormState s;
  s.weight = (torch::randn({c}, f) * 0.5 + 1.0).requires_grad_(true);
  s.bias = (torch::randn({c}, f) * 0.3).requires_grad_(true);
  s.running_mean = torch::randn({c}, f) * 0.2;
  s.running_var = torch::rand({c}, f) + 0.5;
  s.num_batches_tracked = torch::full({}, 3, f.dtype(torch::kLong));
  s.momentum = momentum;
  s.eps = 1e-5;
  s.training = training;
  return s;
}

BatchNormState copy_of(const BatchNormState& s) {
  BatchNormState c = s;
  c.weight = s.weight.detach().clone().requires_grad_(true);
  c.bias = s.bias.detach().clone().requires_grad_(true);
  c.running_mean = s.running_mean.clone();
  c.running_var = s.running_var.clone();
  c.num_batches_tracked = s.num_batches_tracked.clone();
  return c;
}

struct Inputs {
  at::Tensor x, residual, dy;  // in the case's dtype, channels-last
};

// Channels with their own mean (up to a few spreads away from zero) and spread.
Inputs random_inputs(const Shape& s, at::ScalarType dtype, at::MemoryFormat format = kChannelsLast) {
  const auto f = torch::TensorOptions().device(torch::kCUDA).dtype(torch::kFloat);
  const at::Tensor shift = torch::randn({1, s.c, 1, 1}, f) * 2;
  const at::Tensor spread = torch::rand({1, s.c, 1, 1}, f) * 2 + 0.25;
  Inputs in;
  in.x = (torch::randn({s.n, s.c, s.h, s.w}, f) * spread + shift).to(dtype).contiguous(format);
  in.residual = torch::randn({s.n, s.c, s.h, s.w}, f).to(dtype).contiguous(format);
  in.dy = torch::randn({s.n, s.c, s.h, s.w}, f).to(dtype).contiguous(format);
  return in;
}

struct Result {
  at::Tensor y, dx, dweight, dbias, dresidual;
  BatchNormState state;
};

Result run(const Inputs& in, const BatchNormState& state0, bool residual, bool relu, BnKernels kernels) {
  Result r;
  r.state = copy_of(state0);
  const at::Tensor x = in.x.clone().requires_grad_(true);
  const at::Tensor res = residual ? in.residual.clone().requires_grad_(true) : at::Tensor();
  r.y = batch_norm_act(x, r.state, res, relu, kernels);
  std::vector<at::Tensor> wrt = {x, r.state.weight, r.state.bias};
  if (residual) wrt.push_back(res);
  const auto grads = torch::autograd::grad({r.y}, wrt, {in.dy});
  r.dx = grads[0];
  r.dweight = grads[1];
  r.dbias = grads[2];
  if (residual) r.dresidual = grads[3];
  return r;
}

// The reference: ATen's batch_norm (the fallback's op) in float64 on the same inputs. Its backward is taken with the
// fused output's ReLU mask, so that elements within rounding of zero, whose mask may differ, do not count against
// the gradients (the mask itself is checked separately).
struct Reference {
  at::Tensor z, y, dx, dweight, dbias, dresidual, running_mean, running_var;
};

Reference reference(const Inputs& in, const BatchNormState& s0, bool residual, bool relu, const at::Tensor& fused_y) {
  Reference ref;
  const at::Tensor x = in.x.to(at::kDouble).requires_grad_(true);
  const at::Tensor w = s0.weight.detach().to(at::kDouble).requires_grad_(true);
  const at::Tensor b = s0.bias.detach().to(at::kDouble).requires_grad_(true);
  ref.running_mean = s0.running_mean.to(at::kDouble);
  ref.running_var = s0.running_var.to(at::kDouble);
  const at::Tensor bn = at::batch_norm(x, w, b, ref.running_mean, ref.running_var, s0.training, s0.momentum, s0.eps,
                                       /*cudnn_enabled=*/false);
  ref.z = residual ? bn + in.residual.to(at::kDouble) : bn;
  ref.y = relu ? ref.z.relu() : ref.z;
  const at::Tensor dy = in.dy.to(at::kDouble);
  const at::Tensor g = relu ? dy * (fused_y > 0).to(at::kDouble) : dy;
  const auto grads = torch::autograd::grad({bn}, {x, w, b}, {g});
  ref.dx = grads[0];
  ref.dweight = grads[1];
  ref.dbias = grads[2];
  ref.dresidual = g;
  return ref;
}

// The batch statistics' part of the running statistics, straight from float64: mean and unbiased variance.
void expected_running(const Inputs& in, const BatchNormState& s0, at::Tensor* mean, at::Tensor* var) {
  const at::Tensor x = in.x.to(at::kDouble);
  const double m = s0.momentum;
  *mean = (1 - m) * s0.running_mean.to(at::kDouble) + m * x.mean({0, 2, 3});
  *var = (1 - m) * s0.running_var.to(at::kDouble) + m * x.var({0, 2, 3}, /*unbiased=*/true);
}

void check_case(const Shape& shape, at::ScalarType dtype, BnKernels kernels, bool residual, bool relu, bool training) {
  const std::string what = std::string(to_string(kernels)) + " " + dtype_name(dtype) + " " + str(shape) +
                           (residual ? " +res" : "") + (relu ? " relu" : "") + (training ? " train" : " eval");
  SCOPED_TRACE(what);
  const Inputs in = random_inputs(shape, dtype);
  if (kernels == BnKernels::kCudnn && training) {
    const std::string why = cudnn_unsupported_reason(in.x, residual, relu);
    if (!why.empty()) {
      std::printf("[ skipped  ] %-44s cuDNN: %s\n", what.c_str(), why.c_str());
      return;
    }
  }
  const bool cudnn = training && (kernels == BnKernels::kCudnn || (kernels == BnKernels::kAuto && relu && !residual)) &&
                     cudnn_unsupported_reason(in.x, residual, relu).empty();
  // Momentum 1 (the cases without ReLU) makes the running statistics the batch's own, checked straight against
  // float64; 0.1 checks the update's formula.
  const BatchNormState s0 = random_state(shape.c, training, relu ? 0.1 : 1.0);
  const Result r = run(in, s0, residual, relu, kernels);
  const Result aten = run(in, s0, residual, relu, BnKernels::kAten);
  const Reference ref = reference(in, s0, residual, relu, r.y);

  EXPECT_EQ(r.y.scalar_type(), dtype);
  EXPECT_TRUE(r.y.is_contiguous(kChannelsLast));
  EXPECT_EQ(r.dx.scalar_type(), dtype);
  const double e_y = rel_err(r.y, ref.y), e_dx = rel_err(r.dx, ref.dx), e_dw = rel_err(r.dweight, ref.dweight),
               e_db = rel_err(r.dbias, ref.dbias);
  EXPECT_LT(e_y, tol_output(dtype));
  EXPECT_LT(e_dx, tol_grad(dtype));
  EXPECT_LT(e_dw, tol_param(cudnn, dtype));
  EXPECT_LT(e_db, tol_param(cudnn, dtype));
  double e_dr = 0;
  if (residual) {
    e_dr = rel_err(r.dresidual, ref.dresidual);
    EXPECT_LT(e_dr, tol_grad(dtype));
  }
  // The ReLU mask may differ from float64's only where z is within rounding of zero: rn50's kernels compute z in
  // float (1e-4 of its spread is far beyond their error); cuDNN may round inside, so it gets twice the output's
  // tolerance.
  int64_t mask_flips = 0;
  if (relu) {
    const at::Tensor rms = ref.z.pow(2).mean().sqrt();
    const at::Tensor clear = ref.z.abs() > (cudnn ? 2 * tol_output(dtype) : 1e-4) * rms;
    mask_flips = (((r.y > 0) != (ref.z > 0)) & clear).sum().item<int64_t>();
    EXPECT_EQ(mask_flips, 0);
  }
  double e_rm = 0, e_rv = 0, aten_rv = 0;
  if (training) {
    at::Tensor want_mean, want_var;
    expected_running(in, s0, &want_mean, &want_var);
    e_rm = rel_err(r.state.running_mean, want_mean);
    e_rv = rel_err(r.state.running_var, want_var);
    aten_rv = rel_err(aten.state.running_var, want_var);
    EXPECT_LT(e_rm, tol_stats(cudnn));
    EXPECT_LT(e_rv, tol_stats(cudnn));
    EXPECT_EQ(r.state.num_batches_tracked.item<int64_t>(), 4);
  } else {
    EXPECT_TRUE(torch::equal(r.state.running_mean, s0.running_mean));
    EXPECT_TRUE(torch::equal(r.state.running_var, s0.running_var));
    EXPECT_EQ(r.state.num_batches_tracked.item<int64_t>(), 3);
  }
  std::printf(
      "[ rel err  ] %-44s %-5s y %.1e dx %.1e dw %.1e db %.1e dres %.1e rmean %.1e rvar %.1e | ATen %s: y "
      "%.1e rvar %.1e\n",
      what.c_str(), cudnn ? "cuDNN" : "rn50", e_y, e_dx, e_dw, e_db, e_dr, e_rm, e_rv, dtype_name(dtype),
      rel_err(aten.y, ref.y), aten_rv);
}

void check_all(BnKernels kernels) {
  for (const Shape& shape : kShapes) {
    for (at::ScalarType dtype : {at::kHalf, at::kBFloat16, at::kFloat}) {
      for (int variant = 0; variant < 4; ++variant) {
        check_case(shape, dtype, kernels, variant & 1, variant & 2, /*training=*/true);
      }
      check_case(shape, dtype, kernels, true, true, /*training=*/false);
      check_case(shape, dtype, kernels, false, false, /*training=*/false);
    }
  }
}

TEST_F(FusedBnCuda, OwnKernelsMatchFloat64Aten) { check_all(BnKernels::kOwn); }

// BatchNorm+SiLU (rn50's kernels, under kOwn and kAuto alike) against ATen's batch_norm and silu in float64, in
// training and evaluation; the tolerances of the ReLU cases (SiLU's slope is at most 1.1).
TEST_F(FusedBnCuda, SiluMatchesFloat64Aten) {
  for (const Shape& shape : kShapes) {
    for (at::ScalarType dtype : {at::kHalf, at::kBFloat16, at::kFloat}) {
      for (const bool training : {true, false}) {
        for (const BnKernels kernels : {BnKernels::kOwn, BnKernels::kAuto}) {
          const std::string what = std::string(to_string(kernels)) + " " + dtype_name(dtype) + " " + str(shape) +
                                   " silu" + (training ? " train" : " eval");
          SCOPED_TRACE(what);
          const Inputs in = random_inputs(shape, dtype);
          const BatchNormState s0 = random_state(shape.c, training, 1.0);
          BatchNormState state = copy_of(s0);
          const at::Tensor x = in.x.clone().requires_grad_(true);
          const at::Tensor y = batch_norm_act(x, state, {}, Activation::kSilu, kernels);
          const auto grads = torch::autograd::grad({y}, {x, state.weight, state.bias}, {in.dy});
          const at::Tensor xd = in.x.to(at::kDouble).requires_grad_(true);
          const at::Tensor w = s0.weight.detach().to(at::kDouble).requires_grad_(true);
          const at::Tensor b = s0.bias.detach().to(at::kDouble).requires_grad_(true);
          const at::Tensor ref = at::silu(at::batch_norm(xd, w, b, s0.running_mean.to(at::kDouble),
                                                         s0.running_var.to(at::kDouble), training, 1.0, s0.eps, false));
          const auto ref_grads = torch::autograd::grad({ref}, {xd, w, b}, {in.dy.to(at::kDouble)});
          EXPECT_EQ(y.scalar_type(), dtype);
          EXPECT_TRUE(y.is_contiguous(kChannelsLast));
          const double e_y = rel_err(y, ref), e_dx = rel_err(grads[0], ref_grads[0]),
                       e_dw = rel_err(grads[1], ref_grads[1]), e_db = rel_err(grads[2], ref_grads[2]);
          EXPECT_LT(e_y, tol_output(dtype));
          EXPECT_LT(e_dx, tol_grad(dtype));
          EXPECT_LT(e_dw, tol_param(false, dtype));
          EXPECT_LT(e_db, tol_param(false, dtype));
          std::printf("[ rel err  ] %-44s rn50  y %.1e dx %.1e dw %.1e db %.1e\n", what.c_str(), e_y, e_dx, e_dw, e_db);
        }
      }
    }
  }
  EXPECT_EQ(describe_kernels(random_inputs(kShapes[0], at::kHalf).x, false, Activation::kSilu), "rn50");
}
TEST_F(FusedBnCuda, CudnnKernelsMatchFloat64AtenWhereSupported) { check_all(BnKernels::kCudnn); }
TEST_F(FusedBnCuda, AutoMatchesFloat64Aten) { check_all(BnKernels::kAuto); }

TEST_F(FusedBnCuda, SaysWhichKernelsRun) {
  const Inputs in = random_inputs({4, 64, 8, 8}, at::kHalf);
  EXPECT_EQ(fused_unsupported_reason(in.x), "");
  EXPECT_EQ(describe_kernels(in.x, true, true, BnKernels::kOwn), "rn50");
  EXPECT_EQ(describe_kernels(in.x, true, true, BnKernels::kOwn, /*training=*/false), "rn50");
  // kAuto: cuDNN for BatchNorm+ReLU where it takes the case, rn50's kernels for BatchNorm+add+ReLU.
  const std::string cudnn = cudnn_unsupported_reason(in.x, false, true);
  EXPECT_EQ(describe_kernels(in.x, false, true, BnKernels::kAuto),
            cudnn.empty() ? "cuDNN" : "rn50 (cuDNN: " + cudnn + ")");
  EXPECT_EQ(describe_kernels(in.x, true, true, BnKernels::kAuto), "rn50");
  // No cuDNN op adds without an activation: kAuto runs rn50's kernels, kCudnn refuses.
  EXPECT_NE(cudnn_unsupported_reason(in.x, true, false), "");
  EXPECT_EQ(describe_kernels(in.x, true, false, BnKernels::kAuto).rfind("rn50", 0), 0u);
  const BatchNormState s = random_state(64, true);
  EXPECT_THROW(batch_norm_act(in.x, copy_of(s), in.residual, false, BnKernels::kCudnn), std::invalid_argument);
  for (at::ScalarType dtype : {at::kHalf, at::kBFloat16, at::kFloat}) {
    const at::Tensor x = random_inputs({8, 256, 14, 14}, dtype).x;
    for (bool residual : {false, true}) {
      std::printf("[ kernels  ] %-8s [8,256,14,14] %s: kAuto runs %s\n", dtype_name(dtype),
                  residual ? "bn+add+relu" : "bn+relu    ", describe_kernels(x, residual, true).c_str());
    }
  }
}

TEST_F(FusedBnCuda, NchwFallsBackToAtenWithTheSameResults) {
  const Shape shape{4, 64, 10, 10};
  const Inputs in = random_inputs(shape, at::kHalf, at::MemoryFormat::Contiguous);
  ASSERT_FALSE(in.x.is_contiguous(kChannelsLast));
  EXPECT_EQ(fused_unsupported_reason(in.x), "NCHW layout");
  EXPECT_EQ(describe_kernels(in.x, true, true), "ATen (NCHW layout)");
  const BatchNormState s0 = random_state(shape.c, true);
  for (BnKernels k : {BnKernels::kOwn, BnKernels::kCudnn, BnKernels::kAuto}) {
    const Result r = run(in, s0, true, true, k);
    const Result aten = run(in, s0, true, true, BnKernels::kAten);
    // The same ATen ops on the same inputs: the forward exactly; the gradients within 1e-6, in case a backward
    // kernel of ATen's sums in a varying order.
    EXPECT_TRUE(torch::equal(r.y, aten.y)) << to_string(k);
    EXPECT_TRUE(torch::equal(r.state.running_var, aten.state.running_var)) << to_string(k);
    EXPECT_LT(rel_err(r.dx, aten.dx), 1e-6) << to_string(k);
    EXPECT_LT(rel_err(r.dweight, aten.dweight), 1e-6) << to_string(k);
    EXPECT_LT(rel_err(r.dresidual, aten.dresidual), 1e-6) << to_string(k);
  }
}

TEST_F(FusedBnCuda, GradientsInAnyLayoutAndABroadcastOneWork) {
  // The next op's gradient need not be channels-last: an NCHW copy and a broadcast (from a sum) both give the
  // reference's gradients.
  const Shape shape{4, 32, 6, 6};
  Inputs in = random_inputs(shape, at::kFloat);
  const BatchNormState s0 = random_state(shape.c, true);
  for (int layout = 0; layout < 2; ++layout) {
    in.dy = layout == 0 ? in.dy.contiguous() : torch::ones({1, 1, 1, 1}, in.x.options()).expand_as(in.x);
    const Result r = run(in, s0, true, true, BnKernels::kOwn);
    const Reference ref = reference(in, s0, true, true, r.y);
    EXPECT_LT(rel_err(r.dx, ref.dx), tol_grad(at::kFloat)) << layout;
    EXPECT_LT(rel_err(r.dresidual, ref.dresidual), tol_grad(at::kFloat)) << layout;
  }
}

size_t allocated_now() {
  return c10::cuda::CUDACachingAllocator::getDeviceStats(0)
      .allocated_bytes[static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE)]
      .current;
}

size_t allocated_peak() {
  return c10::cuda::CUDACachingAllocator::getDeviceStats(0)
      .allocated_bytes[static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE)]
      .peak;
}

TEST_F(FusedBnCuda, KeepsNoMoreMemoryThanTheUnfusedPath) {
  // What a forward keeps for its backward, and the peak over forward and backward, against ATen's batch_norm,
  // add_ and relu_ (which keep BatchNorm's input and ReLU's output). cuDNN may keep its reserve space (a bit mask:
  // 1/16 of a half tensor), as ATen's own cuDNN BatchNorm does; rn50's kernels keep ReLU's mask as bits (1/16 too).
  const Shape shape{32, 256, 14, 14};
  const Inputs in = random_inputs(shape, at::kHalf);
  const BatchNormState s0 = random_state(shape.c, true);
  const size_t tensor_bytes = static_cast<size_t>(in.x.numel()) * 2;
  for (bool residual : {false, true}) {
    size_t kept[4] = {}, peak[4] = {};
    const BnKernels all[4] = {BnKernels::kAten, BnKernels::kOwn, BnKernels::kCudnn, BnKernels::kAuto};
    for (int i = 0; i < 4; ++i) {
      if (all[i] == BnKernels::kCudnn && !cudnn_unsupported_reason(in.x, residual, true).empty()) continue;
      torch::cuda::synchronize();
      const size_t base = allocated_now();
      c10::cuda::CUDACachingAllocator::resetPeakStats(0);
      {
        BatchNormState s = copy_of(s0);
        const at::Tensor x = in.x.clone().requires_grad_(true);
        const at::Tensor r = residual ? in.residual.clone().requires_grad_(true) : at::Tensor();
        const size_t before = allocated_now();
        at::Tensor y = batch_norm_act(x, s, r, true, all[i]);
        kept[i] = allocated_now() - before;
        std::vector<at::Tensor> wrt = {x};
        if (residual) wrt.push_back(r);
        const auto grads = torch::autograd::grad({y}, wrt, {in.dy});
        torch::cuda::synchronize();
      }
      peak[i] = allocated_peak() - base;
      std::printf("[ memory   ] %-6s %-12s kept after forward %.2f tensors, peak %.2f tensors\n", to_string(all[i]),
                  residual ? "bn+add+relu" : "bn+relu", static_cast<double>(kept[i]) / tensor_bytes,
                  static_cast<double>(peak[i]) / tensor_bytes);
      if (i > 0) {
        const size_t slack = (all[i] == BnKernels::kOwn ? tensor_bytes / 16 : tensor_bytes / 8) + (1 << 20);
        EXPECT_LE(kept[i], kept[0] + slack) << to_string(all[i]);
        EXPECT_LE(peak[i], peak[0] + slack) << to_string(all[i]);
      }
    }
  }
}

TEST_F(FusedBnCuda, CapturedForwardAndBackwardReplayLikeEager) {
  const Shape shape{8, 256, 14, 14};
  for (BnKernels k : {BnKernels::kOwn, BnKernels::kCudnn, BnKernels::kAuto}) {
    SCOPED_TRACE(to_string(k));
    Inputs in = random_inputs(shape, at::kHalf);
    if (k == BnKernels::kCudnn && !cudnn_unsupported_reason(in.x, true, true).empty()) continue;
    BatchNormState s = random_state(shape.c, true);
    const at::Tensor x = in.x.clone().requires_grad_(true);
    const at::Tensor r = in.residual.clone().requires_grad_(true);
    const at::Tensor dy = in.dy.clone();
    const auto step = [&] {
      const at::Tensor y = batch_norm_act(x, s, r, true, k);
      auto grads = torch::autograd::grad({y}, {x, s.weight, s.bias, r}, {dy});
      grads.insert(grads.begin(), y);
      return grads;
    };
    for (int warm = 0; warm < 2; ++warm) step();  // handles, plans and the autograd thread's state before capture
    std::vector<at::Tensor> captured;
    cuda::CudaGraph graph;
    graph.capture([&] { captured = step(); });
    for (int replay = 0; replay < 3; ++replay) {
      const Inputs fresh = random_inputs(shape, at::kHalf);
      {
        torch::NoGradGuard no_grad;
        x.copy_(fresh.x);
        r.copy_(fresh.residual);
        dy.copy_(fresh.dy);
      }
      const BatchNormState before = copy_of(s);
      const int64_t batches = s.num_batches_tracked.item<int64_t>();
      graph.replay();
      const Result eager = run(fresh, before, true, true, k);
      const char* names[5] = {"y", "dx", "dweight", "dbias", "dresidual"};
      const at::Tensor want[5] = {eager.y, eager.dx, eager.dweight, eager.dbias, eager.dresidual};
      for (int i = 0; i < 5; ++i) {
        const double e = rel_err(captured[i], want[i]);
        // rn50's kernels are deterministic: the replay equals eager bit for bit; cuDNN's within float rounding.
        if (k == BnKernels::kOwn) {
          EXPECT_TRUE(torch::equal(captured[i], want[i])) << names[i] << " replay " << replay << " rel err " << e;
        } else {
          EXPECT_LT(e, 1e-5) << names[i] << " replay " << replay;
        }
      }
      EXPECT_LT(rel_err(s.running_mean, eager.state.running_mean), 1e-6) << "replay " << replay;
      EXPECT_LT(rel_err(s.running_var, eager.state.running_var), 1e-6) << "replay " << replay;
      EXPECT_EQ(s.num_batches_tracked.item<int64_t>(), batches + 1) << "replay " << replay;
      std::printf("[ graph    ] %-6s replay %d: y rel err against eager %.1e\n", to_string(k), replay,
                  rel_err(captured[0], eager.y));
    }
  }
}

}  // namespace
}  // namespace rn50::ops
