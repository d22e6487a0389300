// tests/ops/test_fused_layer_norm_cuda.cpp (GPU machine only): add_layer_norm and scaled_residual on rn50's row kernels
// against ATen's ops in float64 on the same inputs (outputs and every gradient, each dtype triple the models use, widths
// of every vector plan and odd row counts), ATen's path where the kernels refuse, and a captured CUDA graph against
// eager. Prints each case's errors, so that the log shows the margins.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "cuda/device_ops.h"
#include "ops/fused_layer_norm.h"
#include "tests/support/cuda_test.h"

namespace rn50::ops {
namespace {

using test::rel_err;

class FusedLayerNormCuda : public test::CudaTest {};

struct Dtypes {
  at::ScalarType x;
  std::optional<at::ScalarType> branch;
  at::ScalarType y;
};

std::string name_of(const Dtypes& d) {
  std::string s = c10::toString(d.x);
  if (d.branch) s += std::string("+") + c10::toString(*d.branch);
  return s + "->" + c10::toString(d.y);
}

// Norm-wise relative tolerances against float64 by the dtype a result is stored in: its rounding (half 2^-11,
// bfloat16 2^-8 per element) with room for float arithmetic; float32 for float sums over up to 1024 columns.
double tol(at::ScalarType t) { return t == at::kFloat ? 2e-5 : t == at::kHalf ? 2e-3 : 1.5e-2; }

// The models' triples: ViT's float32 stream with a half or bfloat16 branch, ConvNeXt's half rows, its stem's half to
// float32, and float32 throughout (training without autocast).
const std::vector<Dtypes> kDtypes = {{at::kFloat, at::kHalf, at::kHalf},
                                     {at::kFloat, at::kBFloat16, at::kBFloat16},
                                     {at::kFloat, std::nullopt, at::kHalf},
                                     {at::kHalf, std::nullopt, at::kHalf},
                                     {at::kHalf, std::nullopt, at::kFloat},
                                     {at::kBFloat16, std::nullopt, at::kBFloat16},
                                     {at::kFloat, at::kFloat, at::kFloat},
                                     {at::kFloat, std::nullopt, at::kFloat}};

// Every vector width (96: 1, 192: 2, 384: 4, 768 and 1024: 8) and odd row counts (a last block part full).
const std::vector<std::pair<int64_t, int64_t>> kShapes = {{1031, 96}, {517, 192}, {257, 384}, {2 * 197, 768},
                                                           {33, 1024}, {3, 32},   {4096, 768}};

at::Tensor randn(int64_t rows, int64_t width, at::ScalarType t, double mean, double spread) {
  return (torch::randn({rows, width}, torch::kCUDA) * spread + mean).to(t);
}

void check_add_layer_norm(int64_t rows, int64_t width, const Dtypes& d) {
  SCOPED_TRACE(std::to_string(rows) + "x" + std::to_string(width) + " " + name_of(d));
  const auto f32 = torch::TensorOptions().device(torch::kCUDA).dtype(torch::kFloat);
  const at::Tensor x0 = randn(rows, width, d.x, 2.0, 1.5);  // rows far from zero mean
  const at::Tensor b0 = d.branch ? randn(rows, width, *d.branch, -1.0, 0.7) : at::Tensor();
  const at::Tensor w0 = torch::randn({width}, f32) * 0.3 + 1.0, bias0 = torch::randn({width}, f32) * 0.3;
  const at::Tensor dy = randn(rows, width, d.y, 0.0, 1.0);
  const at::Tensor dsum = randn(rows, width, d.x, 0.0, 0.5);
  const double eps = 1e-6;
  ASSERT_EQ(fused_layer_norm_unsupported_reason(x0, b0, d.y), "");

  // rn50's kernels.
  const at::Tensor x = x0.clone().requires_grad_(true), w = w0.clone().requires_grad_(true),
                   bias = bias0.clone().requires_grad_(true);
  const at::Tensor b = d.branch ? b0.clone().requires_grad_(true) : at::Tensor();
  const AddLayerNormOut out = add_layer_norm(x, b, w, bias, eps, d.y, /*fused=*/true);
  ASSERT_EQ(out.y.scalar_type(), d.y);
  std::vector<at::Tensor> outputs{out.y}, grads{dy};
  if (d.branch) {
    ASSERT_EQ(out.sum.scalar_type(), d.x);
    outputs.push_back(out.sum);
    grads.push_back(dsum);
  }
  torch::autograd::backward(outputs, grads);

  // float64 from the same values.
  const at::Tensor x64 = x0.to(at::kDouble).requires_grad_(true), w64 = w0.to(at::kDouble).requires_grad_(true),
                   bias64 = bias0.to(at::kDouble).requires_grad_(true);
  const at::Tensor b64 = d.branch ? b0.to(at::kDouble).requires_grad_(true) : at::Tensor();
  const at::Tensor s64 = d.branch ? x64 + b64 : x64;
  const at::Tensor y64 = at::layer_norm(s64, {width}, w64, bias64, eps);
  std::vector<at::Tensor> outputs64{y64}, grads64{dy.to(at::kDouble)};
  if (d.branch) {
    outputs64.push_back(s64);
    grads64.push_back(dsum.to(at::kDouble));
  }
  torch::autograd::backward(outputs64, grads64);

  const double e_y = rel_err(out.y, y64), e_dx = rel_err(x.grad(), x64.grad()), e_dw = rel_err(w.grad(), w64.grad()),
               e_db = rel_err(bias.grad(), bias64.grad());
  EXPECT_LT(e_y, tol(d.y));
  EXPECT_LT(e_dx, 2 * tol(d.x) + tol(d.y));
  EXPECT_LT(e_dw, tol(d.x) + tol(d.y));
  EXPECT_LT(e_db, tol(d.y));
  double e_sum = 0, e_dbranch = 0;
  if (d.branch) {
    e_sum = rel_err(out.sum, s64);
    e_dbranch = rel_err(b.grad(), b64.grad());
    EXPECT_EQ(b.grad().scalar_type(), *d.branch);
    EXPECT_LT(e_sum, tol(d.x));
    EXPECT_LT(e_dbranch, 2 * tol(*d.branch) + tol(d.y));
  }
  std::printf("[ errors   ] add_layer_norm %lldx%lld %s: y %.2e sum %.2e dx %.2e dbranch %.2e dw %.2e db %.2e\n",
              static_cast<long long>(rows), static_cast<long long>(width), name_of(d).c_str(), e_y, e_sum, e_dx,
              e_dbranch, e_dw, e_db);
}

TEST_F(FusedLayerNormCuda, AddLayerNormMatchesFloat64InEveryDtypeAndWidth) {
  for (const Dtypes& d : kDtypes) {
    for (const auto& [rows, width] : kShapes) check_add_layer_norm(rows, width, d);
  }
}

TEST_F(FusedLayerNormCuda, WidthsTheKernelsDoNotTakeRunAtensOps) {
  const at::Tensor x = torch::randn({10, 100}, torch::kCUDA);
  const at::Tensor w = torch::ones({100}, torch::kCUDA), b = torch::zeros({100}, torch::kCUDA);
  EXPECT_NE(fused_layer_norm_unsupported_reason(x, {}, at::kFloat).find("width 100"), std::string::npos);
  const AddLayerNormOut out = add_layer_norm(x, {}, w, b, 1e-5, at::kHalf, true);
  EXPECT_EQ(out.y.scalar_type(), at::kHalf);
  EXPECT_LT(rel_err(out.y, at::layer_norm(x, {100}, w, b, 1e-5)), 2e-3);
  EXPECT_NE(fused_layer_norm_unsupported_reason(x.to(at::kHalf), x, at::kHalf).find("dtypes"), std::string::npos);
}

// ConvNeXt's tail: x channels-last float32, y the NCHW view of an NHWC half tensor, per-sample scale or none.
TEST_F(FusedLayerNormCuda, ScaledResidualMatchesFloat64) {
  for (const auto& [n, c, hw] : std::vector<std::tuple<int64_t, int64_t, int64_t>>{{8, 96, 14}, {5, 768, 3}, {3, 192, 7}}) {
    for (at::ScalarType yt : {at::kHalf, at::kBFloat16, at::kFloat}) {
      for (bool with_scale : {false, true}) {
        SCOPED_TRACE(std::to_string(n) + "x" + std::to_string(c) + "x" + std::to_string(hw) + " " + c10::toString(yt) +
                     (with_scale ? " scale" : ""));
        const at::Tensor x0 = torch::randn({n, c, hw, hw}, torch::kCUDA).contiguous(at::MemoryFormat::ChannelsLast);
        const at::Tensor y0 = torch::randn({n, hw, hw, c}, torch::kCUDA).to(yt).permute({0, 3, 1, 2});
        const at::Tensor g0 = torch::randn({c, 1, 1}, torch::kCUDA) * 0.5;
        const at::Tensor scale = with_scale ? (torch::rand({n}, torch::kCUDA) > 0.3).to(at::kFloat) / 0.7 : at::Tensor();
        const at::Tensor dout = torch::randn({n, c, hw, hw}, torch::kCUDA).contiguous(at::MemoryFormat::ChannelsLast);
        const at::Tensor x = x0.clone().requires_grad_(true), g = g0.clone().requires_grad_(true);
        const at::Tensor y = y0.detach().clone(at::MemoryFormat::Preserve).requires_grad_(true);
        const at::Tensor out = scaled_residual(x, y, g, scale, true);
        EXPECT_TRUE(out.is_contiguous(at::MemoryFormat::ChannelsLast));
        out.backward(dout);
        const at::Tensor x64 = x0.to(at::kDouble).requires_grad_(true), g64 = g0.to(at::kDouble).requires_grad_(true),
                         y64 = y0.to(at::kDouble).requires_grad_(true);
        at::Tensor ref = g64 * y64;
        if (with_scale) ref = ref * scale.to(at::kDouble).view({-1, 1, 1, 1});
        ref = ref + x64;
        ref.backward(dout.to(at::kDouble));
        EXPECT_LT(rel_err(out, ref), tol(at::kFloat));
        EXPECT_LT(rel_err(x.grad(), x64.grad()), 1e-7);
        EXPECT_LT(rel_err(y.grad(), y64.grad()), tol(yt));
        EXPECT_EQ(y.grad().scalar_type(), yt);
        EXPECT_LT(rel_err(g.grad(), g64.grad()), 1e-5);
      }
    }
  }
}

TEST_F(FusedLayerNormCuda, CapturedForwardAndBackwardReplayLikeEager) {
  const int64_t rows = 394, width = 768;
  const auto f32 = torch::TensorOptions().device(torch::kCUDA).dtype(torch::kFloat);
  const at::Tensor x = torch::randn({rows, width}, f32).requires_grad_(true);
  const at::Tensor b = torch::randn({rows, width}, f32).to(at::kHalf).requires_grad_(true);
  const at::Tensor w = (torch::randn({width}, f32) + 1).requires_grad_(true), bias = torch::randn({width}, f32).requires_grad_(true);
  const at::Tensor dy = torch::randn({rows, width}, f32).to(at::kHalf), dsum = torch::randn({rows, width}, f32);
  const auto step = [&] {
    const AddLayerNormOut out = add_layer_norm(x, b, w, bias, 1e-6, at::kHalf, true);
    auto grads = torch::autograd::grad({out.y, out.sum}, {x, b, w, bias}, {dy, dsum});
    grads.insert(grads.begin(), {out.y, out.sum});
    return grads;
  };
  for (int warm = 0; warm < 2; ++warm) step();
  std::vector<at::Tensor> captured;
  cuda::CudaGraph graph;
  graph.capture([&] { captured = step(); });
  for (int replay = 0; replay < 3; ++replay) {
    {
      torch::NoGradGuard no_grad;
      x.copy_(torch::randn({rows, width}, f32));
      b.copy_(torch::randn({rows, width}, f32));
      dy.copy_(torch::randn({rows, width}, f32));
    }
    graph.replay();
    const std::vector<at::Tensor> eager = step();
    ASSERT_EQ(eager.size(), captured.size());
    // Deterministic kernels: the replay equals eager bit for bit.
    for (size_t i = 0; i < eager.size(); ++i) EXPECT_TRUE(torch::equal(captured[i], eager[i])) << i << " replay " << replay;
  }
}

}  // namespace
}  // namespace rn50::ops
