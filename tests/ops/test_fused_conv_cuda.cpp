// tests/ops/test_fused_conv_cuda.cpp (GPU machine only): the fused convolutions on cuDNN's graph API against ATen in
// float64 on fresh random inputs: forward with and without the scale-bias-ReLU prologue and its statistics, the
// weight gradient with the prologue, the data gradient with dReLU and BatchNorm's backward weights (through to the
// BatchNorm's input gradient against autograd), the finalize, apply and input-gradient kernels, a captured CUDA graph
// against eager, every op repeating bit for bit under deterministic cuDNN; the prologue run separately, the timed
// choice between the two forms, and those choices from the plan cache's file; plan_search: exhaustive's choices;
// ReLU's mask as bits and bn3's backward reading them. Prints each case's relative errors, so that the log shows the
// margins.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <functional>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "core/plan_cache.h"
#include "core/plan_search.h"
#include "cuda/device_ops.h"
#include "ops/fused_batch_norm_backend.h"
#include "ops/fused_conv.h"
#include "tests/support/cuda_test.h"
#include "tests/support/temp_dir.h"

namespace rn50::ops {
namespace {

constexpr auto kChannelsLast = at::MemoryFormat::ChannelsLast;

using test::rel_err;

class FusedConvCuda : public test::CudaTest {};

struct Case {
  int64_t n, c, size, k, kernel, stride;
  int64_t padding() const { return kernel / 2; }
};

std::string str(const Case& s) {
  char b[96];
  std::snprintf(b, sizeof(b), "N%lld C%lld %lldx%lld K%lld %lldx%lld/%lld", static_cast<long long>(s.n),
                static_cast<long long>(s.c), static_cast<long long>(s.size), static_cast<long long>(s.size),
                static_cast<long long>(s.k), static_cast<long long>(s.kernel), static_cast<long long>(s.kernel),
                static_cast<long long>(s.stride));
  return b;
}

// ResNet-50's kinds (1x1, 3x3, strided 3x3, strided 1x1) at small batches, and odd ones: batch 1 at 7x7, channels
// not a multiple of 8 or of 64.
const std::vector<Case> kCases = {{8, 64, 28, 64, 3, 1},   {4, 256, 14, 64, 1, 1},  {4, 128, 28, 128, 3, 2},
                                  {4, 256, 28, 512, 1, 2}, {1, 512, 7, 2048, 1, 1}, {2, 72, 9, 24, 3, 1},
                                  {3, 40, 7, 96, 1, 1}};

const char* dtype_name(at::ScalarType t) { return t == at::kHalf ? "float16" : "bfloat16"; }

// Norm-wise relative tolerances against float64 on the same 16-bit inputs: the output's rounding (half 2^-11,
// bfloat16 2^-8 per element) with room for float accumulation inside cuDNN's kernels.
double tol_out(at::ScalarType t) { return t == at::kHalf ? 2e-3 : 1.2e-2; }
// Sums and sums of squares: float accumulation over N*H*W values in the epilogue, against float64 sums of the very y
// the kernel wrote (so only the accumulation is measured).
constexpr double kTolSums = 1e-4;

at::Tensor randn_nhwc(std::vector<int64_t> shape, at::ScalarType t, double scale = 1.0) {
  return (at::randn(shape, at::TensorOptions(at::kCUDA).dtype(at::kFloat)) * scale).to(t).contiguous(kChannelsLast);
}

at::Tensor channel_param(int64_t c, double lo, double hi) {
  return at::rand({c}, at::TensorOptions(at::kCUDA).dtype(at::kFloat)) * (hi - lo) + lo;
}

// cuDNN offering no plan is a std::runtime_error naming the pattern and every typing tried.
void expect_no_plan(const std::function<void()>& call) {
  try {
    call();
    ADD_FAILURE() << "expected cuDNN to offer no plan";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("no plan"), std::string::npos) << e.what();
  }
}

at::Tensor prologue_ref(const at::Tensor& x, const Prologue& p) {
  const at::Tensor xd = x.to(at::kDouble);
  if (!p.defined()) return xd;
  return at::relu(xd * p.scale.to(at::kDouble).view({1, -1, 1, 1}) + p.bias.to(at::kDouble).view({1, -1, 1, 1}));
}

TEST_F(FusedConvCuda, ForwardWithStatisticsMatchesFloat64) {
  for (const at::ScalarType t : {at::kHalf, at::kBFloat16}) {
    for (const Case& s : kCases) {
      for (const bool with_prologue : {false, true}) {
        at::manual_seed(11);
        const at::Tensor x = randn_nhwc({s.n, s.c, s.size, s.size}, t);
        const at::Tensor w = randn_nhwc({s.k, s.c, s.kernel, s.kernel}, t, 1.0 / std::sqrt(s.c * s.kernel * s.kernel));
        Prologue p;
        if (with_prologue) p = {channel_param(s.c, 0.5, 1.5), channel_param(s.c, -0.5, 0.5)};
        const ConvGeometry g{s.stride, s.padding()};
        const ConvStats out = conv_forward_stats(x, w, g, p);
        const at::Tensor ref = at::conv2d(prologue_ref(x, p), w.to(at::kDouble), {}, s.stride, s.padding());
        ASSERT_EQ(out.y.sizes(), ref.sizes()) << str(s);
        EXPECT_TRUE(out.y.is_contiguous(kChannelsLast));
        const at::Tensor yd = out.y.to(at::kDouble);
        const double e_y = rel_err(out.y, ref);
        const double e_sum = rel_err(out.sum, yd.sum({0, 2, 3}));
        // Sums can be near zero per channel: measured against the sum of magnitudes as well.
        const double e_sum_abs = (out.sum.to(at::kDouble) - yd.sum({0, 2, 3})).abs().max().item<double>() /
                                 yd.abs().sum({0, 2, 3}).max().item<double>();
        const double e_sq = rel_err(out.sq_sum, (yd * yd).sum({0, 2, 3}));
        std::printf("forward %s %s%s: y %.2e, sum %.2e (%.2e of |y|), sq_sum %.2e  [%s]\n", dtype_name(t),
                    str(s).c_str(), with_prologue ? " +prologue" : "", e_y, e_sum, e_sum_abs, e_sq,
                    last_plan_description().c_str());
        EXPECT_LT(e_y, tol_out(t)) << str(s);
        EXPECT_LT(e_sum_abs, kTolSums) << str(s);
        EXPECT_LT(e_sq, kTolSums) << str(s);
      }
    }
  }
}

TEST_F(FusedConvCuda, WeightGradientWithPrologueMatchesFloat64) {
  for (const at::ScalarType t : {at::kHalf, at::kBFloat16}) {
    for (const Case& s : kCases) {
      for (const bool with_prologue : {false, true}) {
        at::manual_seed(12);
        const at::Tensor x = randn_nhwc({s.n, s.c, s.size, s.size}, t);
        const int64_t out = (s.size + 2 * s.padding() - s.kernel) / s.stride + 1;
        const at::Tensor dy = randn_nhwc({s.n, s.k, out, out}, t);
        Prologue p;
        if (with_prologue) p = {channel_param(s.c, 0.5, 1.5), channel_param(s.c, -0.5, 0.5)};
        const ConvGeometry g{s.stride, s.padding()};
        if (t == at::kBFloat16 && with_prologue) {
          // cuDNN 9 has no bfloat16 engine for the weight gradient with a prologue (seen on the H200): a clear refusal.
          expect_no_plan([&] { conv_backward_filter(x, dy, {s.k, s.c, s.kernel, s.kernel}, g, p); });
          continue;
        }
        const at::Tensor dw = conv_backward_filter(x, dy, {s.k, s.c, s.kernel, s.kernel}, g, p);
        const at::Tensor wd =
            at::zeros({s.k, s.c, s.kernel, s.kernel}, at::TensorOptions(at::kCUDA).dtype(at::kDouble));
        const auto grads =
            at::convolution_backward(dy.to(at::kDouble), prologue_ref(x, p), wd, std::nullopt, {s.stride, s.stride},
                                     {s.padding(), s.padding()}, {1, 1}, false, {0, 0}, 1, {false, true, false});
        const double e = rel_err(dw, std::get<1>(grads));
        std::printf("wgrad %s %s%s: dw %.2e  [%s]\n", dtype_name(t), str(s).c_str(), with_prologue ? " +prologue" : "",
                    e, last_plan_description().c_str());
        EXPECT_TRUE(dw.is_contiguous(kChannelsLast));
        EXPECT_LT(e, tol_out(t)) << str(s);
      }
    }
  }
}

// The prologue as a pass of its own (bn_apply, then the plain pattern: PrologueRun::kSeparate) against float64, the
// same tolerance as the fused form: the activation's rounding to the data's dtype is within it. bfloat16's weight
// gradient, which cuDNN cannot fuse, runs this way.
TEST_F(FusedConvCuda, SeparatePrologueMatchesFloat64) {
  for (const at::ScalarType t : {at::kHalf, at::kBFloat16}) {
    for (const Case& s : kCases) {
      at::manual_seed(19);
      const at::Tensor x = randn_nhwc({s.n, s.c, s.size, s.size}, t);
      const at::Tensor w = randn_nhwc({s.k, s.c, s.kernel, s.kernel}, t, 1.0 / std::sqrt(s.c * s.kernel * s.kernel));
      const int64_t out = (s.size + 2 * s.padding() - s.kernel) / s.stride + 1;
      const at::Tensor dy = randn_nhwc({s.n, s.k, out, out}, t);
      const Prologue p{channel_param(s.c, 0.5, 1.5), channel_param(s.c, -0.5, 0.5), PrologueRun::kSeparate};
      const ConvGeometry g{s.stride, s.padding()};
      const ConvStats f = conv_forward_stats(x, w, g, p);
      const at::Tensor ref = at::conv2d(prologue_ref(x, p), w.to(at::kDouble), {}, s.stride, s.padding());
      const at::Tensor yd = f.y.to(at::kDouble);
      const double e_y = rel_err(f.y, ref), e_sq = rel_err(f.sq_sum, (yd * yd).sum({0, 2, 3}));
      const double e_sum = (f.sum.to(at::kDouble) - yd.sum({0, 2, 3})).abs().max().item<double>() /
                           yd.abs().sum({0, 2, 3}).max().item<double>();
      const at::Tensor dw = conv_backward_filter(x, dy, w.sizes(), g, p);
      const auto grads = at::convolution_backward(dy.to(at::kDouble), prologue_ref(x, p), w.to(at::kDouble),
                                                  std::nullopt, {s.stride, s.stride}, {s.padding(), s.padding()},
                                                  {1, 1}, false, {0, 0}, 1, {false, true, false});
      const double e_dw = rel_err(dw, std::get<1>(grads));
      std::printf("separate prologue %s %s: y %.2e, sum %.2e, sq_sum %.2e, dw %.2e\n", dtype_name(t), str(s).c_str(),
                  e_y, e_sum, e_sq, e_dw);
      EXPECT_TRUE(f.y.is_contiguous(kChannelsLast) && dw.is_contiguous(kChannelsLast)) << str(s);
      EXPECT_LT(e_y, tol_out(t)) << str(s);
      EXPECT_LT(e_sum, kTolSums) << str(s);
      EXPECT_LT(e_sq, kTolSums) << str(s);
      EXPECT_LT(e_dw, tol_out(t)) << str(s);
    }
  }
}

// PrologueRun::kTimed times both forms once per pattern and shape, logs one line naming the pair of times and the one
// kept, and reuses the choice (no second line); under a CUDA graph's capture it replays as the eager call. bfloat16's
// weight gradient, with no fused plan, is run separately and says so. Shapes of this test's own, so that no other test
// has chosen for them on this thread.
TEST_F(FusedConvCuda, TimedPrologueChoosesOnceLogsAndReplaysInAGraph) {
  take_prologue_choices();
  at::manual_seed(20);
  const Case s{6, 48, 20, 40, 3, 1};
  const ConvGeometry g{1, 1};
  const at::Tensor x = randn_nhwc({s.n, s.c, s.size, s.size}, at::kHalf);
  const at::Tensor w = randn_nhwc({s.k, s.c, 3, 3}, at::kHalf, 1.0 / std::sqrt(s.c * 9.0));
  const at::Tensor dy = randn_nhwc({s.n, s.k, s.size, s.size}, at::kHalf);
  const Prologue p{channel_param(s.c, 0.5, 1.5), channel_param(s.c, -0.5, 0.5), PrologueRun::kTimed};
  const ConvStats eager = conv_forward_stats(x, w, g, p);
  const at::Tensor dw = conv_backward_filter(x, dy, w.sizes(), g, p);
  std::vector<std::string> lines = take_prologue_choices();
  ASSERT_EQ(lines.size(), 2U);
  for (const std::string& line : lines) {
    std::printf("%s\n", line.c_str());
    EXPECT_NE(line.find("ms fused"), std::string::npos) << line;
    EXPECT_NE(line.find("ms separately"), std::string::npos) << line;
    EXPECT_TRUE(line.find("prologue fused") != std::string::npos ||
                line.find("prologue separately") != std::string::npos)
        << line;
  }
  EXPECT_EQ(lines[0].rfind("conv+stats x 6x48x20x20, w 40x48x3x3", 0), 0U) << lines[0];
  EXPECT_EQ(lines[1].rfind("wgrad x 6x48x20x20, w 40x48x3x3", 0), 0U) << lines[1];
  EXPECT_LT(rel_err(eager.y, at::conv2d(prologue_ref(x, p), w.to(at::kDouble), {}, 1, 1)), tol_out(at::kHalf));
  const auto grads = at::convolution_backward(dy.to(at::kDouble), prologue_ref(x, p), w.to(at::kDouble), std::nullopt,
                                              {1, 1}, {1, 1}, {1, 1}, false, {0, 0}, 1, {false, true, false});
  EXPECT_LT(rel_err(dw, std::get<1>(grads)), tol_out(at::kHalf));

  const ConvStats forward_again = conv_forward_stats(x, w, g, p);
  const at::Tensor again = conv_backward_filter(x, dy, w.sizes(), g, p);
  EXPECT_TRUE(take_prologue_choices().empty());  // both choices kept: neither timed again
  EXPECT_TRUE(at::equal(forward_again.y, eager.y));
  // Weight gradients may add split sums in any order: equal up to float accumulation, not bit for bit.
  EXPECT_LT(rel_err(again, dw), 1e-3);

  at::Tensor input = at::zeros_like(x);
  ConvStats captured;
  at::Tensor captured_dw;
  cuda::CudaGraph graph;
  graph.capture([&] {
    captured = conv_forward_stats(input, w, g, p);
    captured_dw = conv_backward_filter(input, dy, w.sizes(), g, p);
  });
  input.copy_(x);
  graph.replay();
  torch::cuda::synchronize();
  EXPECT_TRUE(at::equal(captured.y, eager.y));
  EXPECT_TRUE(at::allclose(captured.sum, eager.sum, 1e-5, 1e-3));
  EXPECT_LT(rel_err(captured_dw, dw), 1e-3);
  EXPECT_TRUE(take_prologue_choices().empty());

  const at::Tensor xb = x.to(at::kBFloat16), dyb = dy.to(at::kBFloat16);
  const at::Tensor dwb = conv_backward_filter(xb, dyb, w.sizes(), g, p);
  lines = take_prologue_choices();
  ASSERT_EQ(lines.size(), 1U);
  std::printf("%s\n", lines[0].c_str());
  EXPECT_NE(lines[0].find("prologue separately"), std::string::npos) << lines[0];
  EXPECT_NE(lines[0].find("fused: no plan"), std::string::npos) << lines[0];
  EXPECT_LT(rel_err(dwb, std::get<1>(grads)), tol_out(at::kBFloat16));
}

// What one thread computes with a plan cache in use: a new thread has no plans or prologue choices of its own (they
// are kept per thread), so each comes from the cache or is timed there and then.
struct CacheRun {
  ConvStats forward;
  at::Tensor dw;
  std::string plan;  // the last plan's description
  std::vector<std::string> choices;
  std::string error;
};

CacheRun run_with_cache(PlanCache& cache, const at::Tensor& x, const at::Tensor& w, const at::Tensor& dy,
                        const Prologue& p) {
  CacheRun out;
  torch::cuda::synchronize();  // the inputs, made on the caller's stream
  std::thread thread([&] {
    try {
      cuda::use_side_stream(0);
      const UsePlanCache use(cache);
      out.forward = conv_forward_stats(x, w, {1, 1}, p);
      out.dw = conv_backward_filter(x, dy, w.sizes(), {1, 1}, p);
      out.plan = last_plan_description();
      torch::cuda::synchronize();
    } catch (const std::exception& e) {
      out.error = e.what();
    }
  });
  thread.join();
  out.choices = take_prologue_choices();
  return out;
}

std::vector<std::string> lines_starting(const std::string& path, const std::string& prefix) {
  std::ifstream in(path);
  std::vector<std::string> out;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(prefix, 0) == 0) out.push_back(line);
  }
  return out;
}

// The plan cache (core/plan_cache.h): the choices one run timed and saved, a later one takes from the file without
// timing (each logged so) and computes the same outputs; a choice cuDNN does not offer is searched for again and
// replaced in the file.
TEST_F(FusedConvCuda, PlanCacheGivesTheTimedChoicesWithoutTiming) {
  take_prologue_choices();
  at::manual_seed(22);
  const Case s{6, 48, 20, 40, 3, 1};
  const at::Tensor x = randn_nhwc({s.n, s.c, s.size, s.size}, at::kHalf);
  const at::Tensor w = randn_nhwc({s.k, s.c, 3, 3}, at::kHalf, 1.0 / std::sqrt(s.c * 9.0));
  const at::Tensor dy = randn_nhwc({s.n, s.k, s.size, s.size}, at::kHalf);
  const Prologue p{channel_param(s.c, 0.5, 1.5), channel_param(s.c, -0.5, 0.5), PrologueRun::kTimed};
  testing::TempDir dir;
  const std::string path = dir.file("plans.txt");
  const std::string context = fused_conv_plan_context();
  std::printf("context: %s\n", context.c_str());

  PlanCache first(path, context);
  const CacheRun timed = run_with_cache(first, x, w, dy, p);
  ASSERT_EQ(timed.error, "");
  ASSERT_EQ(timed.choices.size(), 2U);
  for (const std::string& line : timed.choices) EXPECT_NE(line.find("ms fused"), std::string::npos) << line;
  EXPECT_EQ(first.hits(), 0);
  EXPECT_EQ(first.added(), 6);  // both forms of both patterns were planned to be timed, and the two choices
  ASSERT_EQ(first.save(), "");
  const std::vector<std::string> plans = lines_starting(path, "plan ");
  EXPECT_EQ(plans.size(), 4U);
  EXPECT_EQ(lines_starting(path, "prologue ").size(), 2U);
  for (const std::string& line : plans) std::printf("%s\n", line.c_str());

  PlanCache second(path, context);
  const CacheRun cached = run_with_cache(second, x, w, dy, p);
  ASSERT_EQ(cached.error, "");
  ASSERT_EQ(cached.choices.size(), 2U);
  for (size_t i = 0; i < 2; ++i) {
    std::printf("%s\n%s\n", timed.choices[i].c_str(), cached.choices[i].c_str());
    EXPECT_NE(cached.choices[i].find("from the plan cache"), std::string::npos) << cached.choices[i];
    // The same form as timed: "prologue fused" or "prologue separately" in both lines.
    const bool separately = timed.choices[i].find("prologue separately") != std::string::npos;
    EXPECT_NE(cached.choices[i].find(separately ? "prologue separately" : "prologue fused"), std::string::npos);
  }
  std::printf("timed: %s\ncached: %s\n", timed.plan.c_str(), cached.plan.c_str());
  EXPECT_NE(cached.plan.find("from the plan cache"), std::string::npos) << cached.plan;
  // The last plan run (the weight gradient's chosen form): the engine the search chose, rebuilt.
  EXPECT_EQ(cached.plan.substr(0, cached.plan.find(',')), timed.plan.substr(0, timed.plan.find(',')));
  EXPECT_EQ(second.misses(), 0);
  EXPECT_EQ(second.hits(), 4);                                // two prologue choices, and the plan of each chosen form
  EXPECT_TRUE(at::equal(cached.forward.y, timed.forward.y));  // the same engine and knobs: the same kernel
  EXPECT_LT(rel_err(cached.dw, timed.dw), 1e-3);              // split sums may add in any order
  EXPECT_EQ(second.save(), "");                               // nothing new: the file as it was
  EXPECT_EQ(lines_starting(path, "plan "), plans);

  // Every engine replaced by one cuDNN does not have: the plans of the chosen forms are searched for and timed again
  // and replaced in the file; the other forms', never looked up, stay as they were.
  {
    std::vector<std::string> text = lines_starting(path, "");
    std::ofstream out(path);
    for (std::string& line : text) {
      if (line.rfind("plan ", 0) == 0) {
        std::istringstream in(line);
        std::string verb, key, variant, engine, knobs, ms;
        in >> verb >> key >> variant >> engine >> knobs >> ms;
        line = verb + " " + key + " " + variant + " 999999 " + knobs + " " + ms;
      }
      out << line << "\n";
    }
  }
  PlanCache third(path, context);
  const CacheRun searched = run_with_cache(third, x, w, dy, p);
  ASSERT_EQ(searched.error, "");
  EXPECT_EQ(searched.plan.find("from the plan cache"), std::string::npos) << searched.plan;
  EXPECT_EQ(third.misses(), 2);
  EXPECT_EQ(third.hits(), 2);  // the prologue choices
  // Timed again, the search may choose another engine or typing: the same values within the output's rounding.
  EXPECT_LT(rel_err(searched.forward.y, timed.forward.y), tol_out(at::kHalf));
  EXPECT_LT(rel_err(searched.dw, timed.dw), tol_out(at::kHalf));
  ASSERT_EQ(third.save(), "");
  int stale = 0;
  for (const std::string& line : lines_starting(path, "plan ")) stale += line.find(" 999999 ") != std::string::npos;
  EXPECT_EQ(stale, 2);
  EXPECT_EQ(lines_starting(path, "plan ").size(), 4U);
}

struct SearchRun {
  at::Tensor dx;
  std::string plan;
  std::string error;
};

// The data gradient planned on a thread of its own (a fresh set of thread plans) under that search and cache.
SearchRun run_searched(PlanSearch search, PlanCache* cache, const at::Tensor& dy, const at::Tensor& w,
                       at::IntArrayRef x_sizes) {
  SearchRun out;
  torch::cuda::synchronize();
  std::thread thread([&] {
    try {
      cuda::use_side_stream(0);
      const UsePlanSearch use_search(search);
      std::unique_ptr<UsePlanCache> use_cache = cache ? std::make_unique<UsePlanCache>(*cache) : nullptr;
      out.dx = conv_backward_data(dy, w, x_sizes, {1, 1});
      out.plan = last_plan_description();
      torch::cuda::synchronize();
    } catch (const std::exception& e) {
      out.error = e.what();
    }
  });
  thread.join();
  return out;
}

// plan_search: exhaustive (ops/plan_search.h): the heuristics' candidates and the enumerated ones are timed, the
// choice is logged as listed or enumerated, the result matches float64; the plan cache keeps it under its own key, a
// later exhaustive run rebuilds it from the file (cudnn_graph::plan_from_knobs where the heuristics do not list it)
// and computes the same values, and a heuristics run does not take it.
TEST_F(FusedConvCuda, ExhaustiveSearchTimesEnumeratedPlansAndTheCacheKeepsThem) {
  at::manual_seed(23);
  const Case s{8, 64, 28, 64, 3, 1};
  const at::Tensor w = randn_nhwc({s.k, s.c, 3, 3}, at::kHalf, 1.0 / std::sqrt(s.c * 9.0));
  const at::Tensor dy = randn_nhwc({s.n, s.k, s.size, s.size}, at::kHalf);
  const std::vector<int64_t> x_sizes{s.n, s.c, s.size, s.size};
  const at::Tensor ref = std::get<0>(at::convolution_backward(
      dy.to(at::kDouble), at::zeros(x_sizes, dy.options().dtype(at::kDouble)), w.to(at::kDouble), std::nullopt, {1, 1},
      {1, 1}, {1, 1}, false, {0, 0}, 1, {true, false, false}));
  testing::TempDir dir;
  const std::string path = dir.file("plans.txt");
  const std::string context = fused_conv_plan_context();

  PlanCache first(path, context);
  const SearchRun searched = run_searched(PlanSearch::kExhaustive, &first, dy, w, x_sizes);
  ASSERT_EQ(searched.error, "");
  std::printf("exhaustive: %s\n", searched.plan.c_str());
  EXPECT_NE(searched.plan.find("enumerated beyond the heuristics"), std::string::npos) << searched.plan;
  EXPECT_EQ(searched.plan.find("(0 of them enumerated"), std::string::npos) << "nothing beyond the heuristics";
  const double err = rel_err(searched.dx, ref);
  std::printf("exhaustive dgrad against float64: %.3g\n", err);
  EXPECT_LT(err, tol_out(at::kHalf));
  ASSERT_EQ(first.save(), "");
  const std::vector<std::string> plans = lines_starting(path, "plan ");
  ASSERT_EQ(plans.size(), 1U);
  EXPECT_NE(plans[0].find("/exhaustive "), std::string::npos) << plans[0];

  PlanCache second(path, context);
  const SearchRun cached = run_searched(PlanSearch::kExhaustive, &second, dy, w, x_sizes);
  ASSERT_EQ(cached.error, "");
  std::printf("from the file: %s\n", cached.plan.c_str());
  EXPECT_NE(cached.plan.find("from the plan cache"), std::string::npos) << cached.plan;
  EXPECT_EQ(second.hits(), 1);
  EXPECT_EQ(cached.plan.substr(0, cached.plan.find(',')), searched.plan.substr(0, searched.plan.find(',')));
  EXPECT_LT(rel_err(cached.dx, searched.dx), 1e-3);  // the same engine and knobs (split sums may add in any order)

  PlanCache third(path, context);
  const SearchRun heuristic = run_searched(PlanSearch::kHeuristics, &third, dy, w, x_sizes);
  ASSERT_EQ(heuristic.error, "");
  std::printf("heuristics: %s\n", heuristic.plan.c_str());
  EXPECT_EQ(third.hits(), 0);
  EXPECT_EQ(third.misses(), 1);
  EXPECT_EQ(heuristic.plan.find("enumerated"), std::string::npos) << heuristic.plan;
  EXPECT_LT(rel_err(heuristic.dx, ref), tol_out(at::kHalf));
}

// The BatchNorm before the convolution in training: its input x, batch statistics from x itself; the reference is
// autograd in float64 through batch_norm (batch statistics), ReLU and the convolution.
TEST_F(FusedConvCuda, DataGradientThroughBatchNormMatchesAutograd) {
  for (const at::ScalarType t : {at::kHalf, at::kBFloat16}) {
    for (const Case& s : kCases) {
      at::manual_seed(13);
      const at::Tensor x = randn_nhwc({s.n, s.c, s.size, s.size}, t, 2.0);
      const at::Tensor w = randn_nhwc({s.k, s.c, s.kernel, s.kernel}, t, 1.0 / std::sqrt(s.c * s.kernel * s.kernel));
      const int64_t out = (s.size + 2 * s.padding() - s.kernel) / s.stride + 1;
      const at::Tensor dy = randn_nhwc({s.n, s.k, out, out}, t);
      const at::Tensor gamma = channel_param(s.c, 0.5, 1.5), beta = channel_param(s.c, -0.5, 0.5);
      const double eps = 1e-5;
      const at::Tensor xd = x.to(at::kDouble);
      const at::Tensor mean = xd.mean({0, 2, 3});
      const at::Tensor var = xd.var({0, 2, 3}, /*unbiased=*/false);
      const at::Tensor invstd = (var + eps).rsqrt();
      BnSaved bn{x, mean.to(at::kFloat), invstd.to(at::kFloat), gamma, beta};
      if (t == at::kBFloat16) {
        // No bfloat16 engine for dgrad + dReLU + BatchNorm's backward weights in cuDNN 9 (seen on the H200).
        expect_no_plan([&] { conv_backward_data_bn(dy, w, bn, {s.stride, s.padding()}); });
        continue;
      }
      const DgradBn got = conv_backward_data_bn(dy, w, bn, {s.stride, s.padding()});
      const at::Tensor dx = dbn_apply(got, x);

      at::Tensor xr = xd.clone().requires_grad_(true);
      at::Tensor gr = gamma.to(at::kDouble).requires_grad_(true), br = beta.to(at::kDouble).requires_grad_(true);
      at::Tensor z = at::batch_norm(xr, gr, br, {}, {}, true, 0.1, eps, false);
      z.retain_grad();
      const at::Tensor y = at::conv2d(at::relu(z), w.to(at::kDouble), {}, s.stride, s.padding());
      (y * dy.to(at::kDouble)).sum().backward();
      const double e_dz = rel_err(got.dz, z.grad());
      const double e_dg = rel_err(got.dweight, gr.grad());
      const double e_db = rel_err(got.dbias, br.grad());
      const double e_dx = rel_err(dx, xr.grad());
      std::printf("dgrad+dbn %s %s: dz %.2e, dweight %.2e, dbias %.2e, dx %.2e  [%s]\n", dtype_name(t), str(s).c_str(),
                  e_dz, e_dg, e_db, e_dx, last_plan_description().c_str());
      // dz is rounded to the dtype once; the sums over it and dx (computed from the rounded dz and x) get twice the
      // output's room, BatchNorm's input gradient being a difference of terms of similar size.
      EXPECT_LT(e_dz, tol_out(t)) << str(s);
      EXPECT_LT(e_dg, 2 * tol_out(t)) << str(s);
      EXPECT_LT(e_db, 2 * tol_out(t)) << str(s);
      EXPECT_LT(e_dx, 2 * tol_out(t)) << str(s);
    }
  }
}

// At a block boundary (the next block's 1x1 conv1, stride 1): the input gradient, dgrad plus the identity's gradient,
// through the previous block's output ReLU (its mask recomputed from bn3's input and the residual) and into its bn3's
// backward weights in one graph, against autograd in float64 through batch_norm (batch statistics), the residual add,
// ReLU and the convolution; then bn3's input gradient.
TEST_F(FusedConvCuda, BoundaryDataGradientThroughAddReluAndBatchNormMatchesAutograd) {
  const at::ScalarType t = at::kHalf;
  for (const Case& s : kCases) {
    if (s.kernel != 1 || s.stride != 1) continue;  // the boundary's convolution
    at::manual_seed(18);
    const at::Tensor y3 = randn_nhwc({s.n, s.c, s.size, s.size}, t, 2.0);  // bn3's input
    const at::Tensor r = randn_nhwc({s.n, s.c, s.size, s.size}, t);        // the previous block's residual
    const at::Tensor w = randn_nhwc({s.k, s.c, 1, 1}, t, 1.0 / std::sqrt(s.c));
    const at::Tensor dy = randn_nhwc({s.n, s.k, s.size, s.size}, t);
    const at::Tensor acc = randn_nhwc({s.n, s.c, s.size, s.size}, t);  // the identity's gradient
    const at::Tensor gamma = channel_param(s.c, 0.5, 1.5), beta = channel_param(s.c, -0.5, 0.5);
    const double eps = 1e-5;
    const at::Tensor xd = y3.to(at::kDouble);
    const at::Tensor mean = xd.mean({0, 2, 3});
    const at::Tensor invstd = (xd.var({0, 2, 3}, /*unbiased=*/false) + eps).rsqrt();
    at::Tensor xr = xd.clone().requires_grad_(true);
    at::Tensor gr = gamma.to(at::kDouble).requires_grad_(true), br = beta.to(at::kDouble).requires_grad_(true);
    at::Tensor z = at::batch_norm(xr, gr, br, {}, {}, true, 0.1, eps, false) + r.to(at::kDouble);
    z.retain_grad();
    const at::Tensor out = at::relu(z);
    const at::Tensor y = at::conv2d(out, w.to(at::kDouble));
    ((y * dy.to(at::kDouble)).sum() + (out * acc.to(at::kDouble)).sum()).backward();

    const BnSaved bn{y3, mean.to(at::kFloat), invstd.to(at::kFloat), gamma, beta};
    const DgradBn got = conv_backward_data_add_bn(dy, w, acc, r, bn, {1, 0});
    const at::Tensor dx = dbn_apply(got, y3);
    const double e_dz = rel_err(got.dz, z.grad());
    const double e_dg = rel_err(got.dweight, gr.grad());
    const double e_db = rel_err(got.dbias, br.grad());
    const double e_dx = rel_err(dx, xr.grad());
    std::printf("dgrad+add+dbn %s %s: dz %.2e, dweight %.2e, dbias %.2e, dx %.2e  [%s]\n", dtype_name(t),
                str(s).c_str(), e_dz, e_dg, e_db, e_dx, last_plan_description().c_str());
    // As the data gradient through BatchNorm above: dz rounded once, the sums and dx twice the output's room.
    EXPECT_LT(e_dz, tol_out(t)) << str(s);
    EXPECT_LT(e_dg, 2 * tol_out(t)) << str(s);
    EXPECT_LT(e_db, 2 * tol_out(t)) << str(s);
    EXPECT_LT(e_dx, 2 * tol_out(t)) << str(s);
  }
}

// With deterministic cuDNN asked for, every op repeats bit for bit (the epilogues' sums are recomputed by ATen's
// ordered reductions, fused_conv_cuda.cpp) and stays as close to float64 as the fast path's tolerances demand: the
// forward's sums, the weight gradient, and the data gradient's BatchNorm weights through to the BatchNorm's input
// gradient against autograd.
TEST_F(FusedConvCuda, DeterministicModeRepeatsBitForBit) {
  const test::DeterministicCudnn deterministic;
  for (const Case& s : kCases) {
    at::manual_seed(18);
    const at::Tensor x = randn_nhwc({s.n, s.c, s.size, s.size}, at::kHalf, 2.0);
    const at::Tensor w =
        randn_nhwc({s.k, s.c, s.kernel, s.kernel}, at::kHalf, 1.0 / std::sqrt(s.c * s.kernel * s.kernel));
    const int64_t out = (s.size + 2 * s.padding() - s.kernel) / s.stride + 1;
    const at::Tensor dy = randn_nhwc({s.n, s.k, out, out}, at::kHalf);
    const ConvGeometry g{s.stride, s.padding()};
    const Prologue p{channel_param(s.c, 0.5, 1.5), channel_param(s.c, -0.5, 0.5)};

    const ConvStats f1 = conv_forward_stats(x, w, g, p), f2 = conv_forward_stats(x, w, g, p);
    EXPECT_TRUE(at::equal(f1.y, f2.y) && at::equal(f1.sum, f2.sum) && at::equal(f1.sq_sum, f2.sq_sum)) << str(s);
    const at::Tensor yd = f1.y.to(at::kDouble);
    const double e_sum = (f1.sum.to(at::kDouble) - yd.sum({0, 2, 3})).abs().max().item<double>() /
                         yd.abs().sum({0, 2, 3}).max().item<double>();
    const double e_sq = rel_err(f1.sq_sum, (yd * yd).sum({0, 2, 3}));
    EXPECT_LT(e_sum, kTolSums) << str(s);
    EXPECT_LT(e_sq, kTolSums) << str(s);

    const at::Tensor dw1 = conv_backward_filter(x, dy, w.sizes(), g, p),
                     dw2 = conv_backward_filter(x, dy, w.sizes(), g, p);
    EXPECT_TRUE(at::equal(dw1, dw2)) << str(s);

    const at::Tensor xd = x.to(at::kDouble);
    const at::Tensor mean = xd.mean({0, 2, 3}), invstd = (xd.var({0, 2, 3}, false) + 1e-5).rsqrt();
    const BnSaved bn{x, mean.to(at::kFloat), invstd.to(at::kFloat), p.scale, p.bias};
    const DgradBn d1 = conv_backward_data_bn(dy, w, bn, g), d2 = conv_backward_data_bn(dy, w, bn, g);
    for (const auto& [a, b] : {std::pair{d1.dz, d2.dz},
                               {d1.dweight, d2.dweight},
                               {d1.dbias, d2.dbias},
                               {d1.eq_dy, d2.eq_dy},
                               {d1.eq_x, d2.eq_x},
                               {d1.eq_bias, d2.eq_bias}}) {
      EXPECT_TRUE(at::equal(a, b)) << str(s);
    }
    at::Tensor xr = xd.clone().requires_grad_(true);
    at::Tensor gr = p.scale.to(at::kDouble).requires_grad_(true), br = p.bias.to(at::kDouble).requires_grad_(true);
    const at::Tensor z = at::batch_norm(xr, gr, br, {}, {}, true, 0.1, 1e-5, false);
    (at::conv2d(at::relu(z), w.to(at::kDouble), {}, s.stride, s.padding()) * dy.to(at::kDouble)).sum().backward();
    const double e_dg = rel_err(d1.dweight, gr.grad()), e_db = rel_err(d1.dbias, br.grad());
    const double e_dx = rel_err(dbn_apply(d1, x), xr.grad());
    std::printf("deterministic %s: sum %.2e, sq_sum %.2e; dweight %.2e, dbias %.2e, dx %.2e against float64\n",
                str(s).c_str(), e_sum, e_sq, e_dg, e_db, e_dx);
    EXPECT_LT(e_dg, 2 * tol_out(at::kHalf)) << str(s);
    EXPECT_LT(e_db, 2 * tol_out(at::kHalf)) << str(s);
    EXPECT_LT(e_dx, 2 * tol_out(at::kHalf)) << str(s);
  }
}

// The plain data gradient, and the accumulating one (cuDNN's beta = 1: a block input's two gradients summed in the
// second convolution): against float64, and planning (which times candidates) must not add into the tensor twice.
TEST_F(FusedConvCuda, DataGradientAccumulatesIntoTheGivenTensorOnce) {
  for (const Case& s : kCases) {
    at::manual_seed(17);
    const at::Tensor w =
        randn_nhwc({s.k, s.c, s.kernel, s.kernel}, at::kHalf, 1.0 / std::sqrt(s.c * s.kernel * s.kernel));
    const int64_t out = (s.size + 2 * s.padding() - s.kernel) / s.stride + 1;
    const at::Tensor dy = randn_nhwc({s.n, s.k, out, out}, at::kHalf);
    const std::vector<int64_t> x_sizes{s.n, s.c, s.size, s.size};
    const at::Tensor prior = randn_nhwc(x_sizes, at::kHalf);
    const auto grads = at::convolution_backward(
        dy.to(at::kDouble), at::zeros(x_sizes, at::TensorOptions(at::kCUDA).dtype(at::kDouble)), w.to(at::kDouble),
        std::nullopt, {s.stride, s.stride}, {s.padding(), s.padding()}, {1, 1}, false, {0, 0}, 1, {true, false, false});
    const at::Tensor want = std::get<0>(grads);
    const ConvGeometry g{s.stride, s.padding()};
    const double e_plain = rel_err(conv_backward_data(dy, w, x_sizes, g), want);
    at::Tensor acc = prior.clone(kChannelsLast);
    const at::Tensor got = conv_backward_data(dy, w, x_sizes, g, acc);  // the first call plans: timing runs
    EXPECT_EQ(got.data_ptr(), acc.data_ptr());
    const double e_acc = rel_err(got, want + prior.to(at::kDouble));
    std::printf("dgrad %s: %.2e, accumulated %.2e  [%s]\n", str(s).c_str(), e_plain, e_acc,
                last_plan_description().c_str());
    EXPECT_LT(e_plain, tol_out(at::kHalf)) << str(s);
    EXPECT_LT(e_acc, tol_out(at::kHalf)) << str(s);
  }
}

TEST_F(FusedConvCuda, FinalizeMatchesFloat64AndUpdatesRunningStatistics) {
  for (const int64_t c : {64, 100, 2048}) {
    at::manual_seed(14);
    const at::Tensor y = randn_nhwc({16, c, 7, 7}, at::kHalf, 3.0) + 0.5;
    const at::Tensor yd = y.to(at::kDouble);
    const at::Tensor sum = yd.sum({0, 2, 3}).to(at::kFloat), sq = (yd * yd).sum({0, 2, 3}).to(at::kFloat);
    BatchNormState bn;
    bn.weight = channel_param(c, 0.5, 1.5);
    bn.bias = channel_param(c, -0.5, 0.5);
    bn.running_mean = channel_param(c, -1, 1);
    bn.running_var = channel_param(c, 0.5, 2);
    bn.num_batches_tracked = at::zeros({}, at::TensorOptions(at::kCUDA).dtype(at::kLong));
    const at::Tensor rm0 = bn.running_mean.to(at::kDouble), rv0 = bn.running_var.to(at::kDouble);
    const BnFinal f = bn_finalize(sum, sq, 16 * 49, bn);
    const at::Tensor mean = yd.mean({0, 2, 3}), var = yd.var({0, 2, 3}, false);
    const at::Tensor invstd = (var + bn.eps).rsqrt();
    const at::Tensor scale = bn.weight.to(at::kDouble) * invstd;
    const double e_mean = rel_err(f.mean, mean), e_inv = rel_err(f.invstd, invstd);
    const double e_scale = rel_err(f.scale, scale);
    const double e_shift = rel_err(f.shift, bn.bias.to(at::kDouble) - mean * scale);
    const double e_rm = rel_err(bn.running_mean, rm0 * 0.9 + mean * 0.1);
    const double e_rv = rel_err(bn.running_var, rv0 * 0.9 + yd.var({0, 2, 3}, true) * 0.1);
    std::printf("finalize C%lld: mean %.2e invstd %.2e scale %.2e shift %.2e running %.2e %.2e\n",
                static_cast<long long>(c), e_mean, e_inv, e_scale, e_shift, e_rm, e_rv);
    // From float sums of 784 values with a mean of 0.5 and a spread of 3: the variance's cancellation costs a few
    // float roundings of E[x^2].
    for (const double e : {e_mean, e_inv, e_scale, e_shift, e_rm, e_rv}) EXPECT_LT(e, 1e-5);
    EXPECT_EQ(bn.num_batches_tracked.item<int64_t>(), 1);
  }
}

TEST_F(FusedConvCuda, ApplyAndInputGradientKernelsMatchFloat64) {
  for (const at::ScalarType t : {at::kHalf, at::kBFloat16}) {
    for (const int64_t c : {64, 2048, 100}) {
      at::manual_seed(15);
      const at::Tensor x = randn_nhwc({3, c, 5, 7}, t), r = randn_nhwc({3, c, 5, 7}, t);
      const at::Tensor s1 = channel_param(c, 0.5, 1.5), b1 = channel_param(c, -1, 1);
      const at::Tensor s2 = channel_param(c, 0.5, 1.5), b2 = channel_param(c, -1, 1);
      auto v = [](const at::Tensor& p) { return p.to(at::kDouble).view({1, -1, 1, 1}); };
      const at::Tensor xd = x.to(at::kDouble), rd = r.to(at::kDouble);
      const double e_plain = rel_err(bn_apply(x, s1, b1, false), xd * v(s1) + v(b1));
      const double e_relu = rel_err(bn_apply(x, s1, b1, true), at::relu(xd * v(s1) + v(b1)));
      const double e_add = rel_err(bn_apply(x, s1, b1, true, r), at::relu(xd * v(s1) + v(b1) + rd));
      const double e_dual =
          rel_err(bn_apply(x, s1, b1, true, r, s2, b2), at::relu(xd * v(s1) + v(b1) + rd * v(s2) + v(b2)));
      DgradBn g;
      g.dz = r;
      g.eq_dy = s1;
      g.eq_x = s2;
      g.eq_bias = b1;
      const double e_dbn = rel_err(dbn_apply(g, x), rd * v(s1) + xd * v(s2) + v(b1));
      std::printf("apply %s C%lld: %.2e %.2e %.2e %.2e, dbn_apply %.2e\n", dtype_name(t), static_cast<long long>(c),
                  e_plain, e_relu, e_add, e_dual, e_dbn);
      for (const double e : {e_plain, e_relu, e_add, e_dual, e_dbn}) EXPECT_LT(e, tol_out(t));
    }
  }
}

// The block output's ReLU mask as bits (bn_apply_relu_bits): the same output as bn_apply, bit k of byte i / 8 set
// exactly where element i (channels-last order) is positive; bn3's backward reading the bits instead of y gives every
// gradient bit for bit (rn50's kernels, with the residual's gradient stored, y withheld).
TEST_F(FusedConvCuda, ReluBitsMarkThePositiveOutputsAndGiveTheSameBackward) {
  for (const at::ScalarType t : {at::kHalf, at::kBFloat16}) {
    for (const int64_t c : {64, 256, 2048}) {  // 2048: several channel tiles and blocks of the apply kernel
      at::manual_seed(17);
      const at::Tensor x = randn_nhwc({3, c, 5, 7}, t), r = randn_nhwc({3, c, 5, 7}, t);
      const at::Tensor s1 = channel_param(c, 0.5, 1.5), b1 = channel_param(c, -1, 1);
      const at::Tensor s2 = channel_param(c, 0.5, 1.5), b2 = channel_param(c, -1, 1);
      const at::Tensor weights =
          at::tensor({1, 2, 4, 8, 16, 32, 64, 128}, at::TensorOptions(at::kCUDA).dtype(at::kLong));
      for (const bool dual : {false, true}) {
        SCOPED_TRACE(std::string(dtype_name(t)) + " C" + std::to_string(c) + (dual ? " dual" : ""));
        const AppliedRelu a = dual ? bn_apply_relu_bits(x, s1, b1, r, s2, b2) : bn_apply_relu_bits(x, s1, b1, r);
        const at::Tensor y = dual ? bn_apply(x, s1, b1, true, r, s2, b2) : bn_apply(x, s1, b1, true, r);
        EXPECT_TRUE(at::equal(a.y, y));
        const at::Tensor positive = (y.permute({0, 2, 3, 1}).reshape({-1, 8}) > 0).to(at::kLong);
        const at::Tensor want = (positive * weights).sum(1).to(at::kByte);
        ASSERT_EQ(a.relu_bits.scalar_type(), at::kByte);
        EXPECT_TRUE(at::equal(a.relu_bits, want));
        const double share = positive.to(at::kDouble).mean().item<double>();
        EXPECT_GT(share, 0.1);  // both kinds of element present
        EXPECT_LT(share, 0.9);

        detail::BackwardIn in;
        in.dy = randn_nhwc({3, c, 5, 7}, t);
        in.x = x;
        in.y = y;
        in.weight = channel_param(c, 0.5, 1.5);
        in.bias = channel_param(c, -1, 1);
        in.mean = channel_param(c, -0.5, 0.5);
        in.invstd = channel_param(c, 0.5, 2);
        in.has_residual = true;
        in.relu = true;
        in.kernels = BnKernels::kOwn;
        in.ran = detail::Ran::kOwn;
        const detail::BackwardOut from_y = detail::backward(in);
        in.y = at::Tensor();
        in.relu_bits = a.relu_bits;
        const detail::BackwardOut from_bits = detail::backward(in);
        EXPECT_TRUE(at::equal(from_bits.dx, from_y.dx));
        EXPECT_TRUE(at::equal(from_bits.dresidual, from_y.dresidual));
        EXPECT_TRUE(at::equal(from_bits.dweight, from_y.dweight));
        EXPECT_TRUE(at::equal(from_bits.dbias, from_y.dbias));
        // Without a residual's stored gradient dx reads y: the bits serve the reduction alone, bit for bit again.
        in.has_residual = false;
        in.relu_bits = at::Tensor();
        in.y = y;
        const detail::BackwardOut plain_y = detail::backward(in);
        in.relu_bits = a.relu_bits;
        const detail::BackwardOut plain_bits = detail::backward(in);
        EXPECT_TRUE(at::equal(plain_bits.dx, plain_y.dx));
        EXPECT_TRUE(at::equal(plain_bits.dweight, plain_y.dweight));
        in.y = at::Tensor();  // neither y nor stored g for dx: refused in one line
        EXPECT_THROW(detail::backward(in), std::invalid_argument);
      }
    }
  }
  const at::Tensor odd = randn_nhwc({2, 100, 3, 3}, at::kHalf);
  EXPECT_THROW(bn_apply_relu_bits(odd, channel_param(100, 0.5, 1.5), channel_param(100, -1, 1)), std::invalid_argument);
}

TEST_F(FusedConvCuda, CapturedGraphReplaysAsEager) {
  at::manual_seed(16);
  const Case s{8, 64, 28, 64, 3, 1};
  const at::Tensor x = randn_nhwc({s.n, s.c, s.size, s.size}, at::kHalf);
  const at::Tensor w = randn_nhwc({s.k, s.c, 3, 3}, at::kHalf, 1.0 / 24);
  const Prologue p{channel_param(s.c, 0.5, 1.5), channel_param(s.c, -0.5, 0.5)};
  const ConvStats eager = conv_forward_stats(x, w, {1, 1}, p);  // builds the plan before capture
  at::Tensor input = at::zeros_like(x);
  ConvStats captured;
  cuda::CudaGraph graph;
  graph.capture([&] { captured = conv_forward_stats(input, w, {1, 1}, p); });
  input.copy_(x);
  graph.replay();
  torch::cuda::synchronize();
  EXPECT_TRUE(at::equal(captured.y, eager.y));
  EXPECT_TRUE(at::allclose(captured.sum, eager.sum, 1e-5, 1e-3));
  EXPECT_TRUE(at::allclose(captured.sq_sum, eager.sq_sum, 1e-5, 1e-3));
}

TEST_F(FusedConvCuda, RefusesNchwFloatAndMismatchedShapes) {
  const at::Tensor x = randn_nhwc({2, 16, 8, 8}, at::kHalf), w = randn_nhwc({8, 16, 1, 1}, at::kHalf);
  EXPECT_THROW(conv_forward_stats(x.contiguous(), w, {}), std::invalid_argument);
  EXPECT_THROW(conv_forward_stats(x.to(at::kFloat), w.to(at::kFloat), {}), std::invalid_argument);
  EXPECT_THROW(conv_forward_stats(x, randn_nhwc({8, 12, 1, 1}, at::kHalf), {}), std::invalid_argument);
  EXPECT_THROW(conv_backward_filter(x, randn_nhwc({2, 8, 4, 4}, at::kHalf), {8, 16, 1, 1}, {}), std::invalid_argument);
  EXPECT_EQ(fused_conv_unsupported_reason(x), "");
  EXPECT_NE(fused_conv_unsupported_reason(x.contiguous()), "");
}

}  // namespace
}  // namespace rn50::ops
