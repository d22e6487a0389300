// bench/ops/bench_fused_conv.cpp: rn50_bench_fused_conv, a benchmark (not a test): ResNet-50's 52 bottleneck
// convolutions at batch 256 in float16 channels-last, each with the BatchNorm after it, timed as the model runs them
// now (ATen's convolution and its gradients, rn50's fused BatchNorm forward and backward) and as the fused-convolution
// recipe would (cuDNN graphs: the previous BatchNorm's scale-bias-ReLU in the prologue, the next one's statistics in
// the epilogue, dgrad with dReLU and BatchNorm's backward weights, wgrad with the prologue; finalize and apply
// kernels), each op captured in a CUDA graph over rotating input sets; for conv2 and conv3 also with the prologue as a
// pass of its own before the plain pattern (conv_prologue: separate). Prints microseconds per op and shape, the plans
// cuDNN chose, and the network's sum each way: what the recipe can save before it is built into the model.
#include <ATen/ATen.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <torch/torch.h>

#include <algorithm>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

#include "bench/ops/graph_timing.h"
#include "ops/fused_batch_norm.h"
#include "ops/fused_conv.h"

namespace {

using rn50::ops::BatchNormState;
using rn50::test::time_calls;

// One distinct convolution of ResNet-50's bottlenecks and how many of the 52 have its shape. `prologue`: its input is
// the previous BatchNorm's ReLU output (conv2 and conv3), which the recipe applies in the convolution's prologue;
// conv1 and the downsample read the block's input. `bn`: the BatchNorm after it: relu (bn1, bn2), residual (bn3: add
// and ReLU, the block's output) or plain (the downsample's, added into bn3's).
enum class Bn { kRelu, kResidual, kPlain };
struct ConvShape {
  const char* where;
  int64_t cin, cout, size, kernel, stride;
  bool prologue;
  Bn bn;
  int count;
};

const ConvShape kConvs[] = {
    {"layer1.0 conv1", 64, 64, 56, 1, 1, false, Bn::kRelu, 1},
    {"layer1.x conv1", 256, 64, 56, 1, 1, false, Bn::kRelu, 2},
    {"layer1 conv2", 64, 64, 56, 3, 1, true, Bn::kRelu, 3},
    {"layer1 conv3", 64, 256, 56, 1, 1, true, Bn::kResidual, 3},
    {"layer1 down", 64, 256, 56, 1, 1, false, Bn::kPlain, 1},
    {"layer2.0 conv1", 256, 128, 56, 1, 1, false, Bn::kRelu, 1},
    {"layer2.0 conv2", 128, 128, 56, 3, 2, true, Bn::kRelu, 1},
    {"layer2.x conv1", 512, 128, 28, 1, 1, false, Bn::kRelu, 3},
    {"layer2.x conv2", 128, 128, 28, 3, 1, true, Bn::kRelu, 3},
    {"layer2 conv3", 128, 512, 28, 1, 1, true, Bn::kResidual, 4},
    {"layer2 down", 256, 512, 56, 1, 2, false, Bn::kPlain, 1},
    {"layer3.0 conv1", 512, 256, 28, 1, 1, false, Bn::kRelu, 1},
    {"layer3.0 conv2", 256, 256, 28, 3, 2, true, Bn::kRelu, 1},
    {"layer3.x conv1", 1024, 256, 14, 1, 1, false, Bn::kRelu, 5},
    {"layer3.x conv2", 256, 256, 14, 3, 1, true, Bn::kRelu, 5},
    {"layer3 conv3", 256, 1024, 14, 1, 1, true, Bn::kResidual, 6},
    {"layer3 down", 512, 1024, 28, 1, 2, false, Bn::kPlain, 1},
    {"layer4.0 conv1", 1024, 512, 14, 1, 1, false, Bn::kRelu, 1},
    {"layer4.0 conv2", 512, 512, 14, 3, 2, true, Bn::kRelu, 1},
    {"layer4.x conv1", 2048, 512, 7, 1, 1, false, Bn::kRelu, 2},
    {"layer4.x conv2", 512, 512, 7, 3, 1, true, Bn::kRelu, 2},
    {"layer4 conv3", 512, 2048, 7, 1, 1, true, Bn::kResidual, 3},
    {"layer4 down", 1024, 2048, 14, 1, 2, false, Bn::kPlain, 1},
};

constexpr auto kChannelsLast = at::MemoryFormat::ChannelsLast;
constexpr int kSets = 3;

struct Options {
  int64_t batch = 256;
  int repeats = 20;
};

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--batch" && i + 1 < argc) {
      o.batch = std::stoll(argv[++i]);
    } else if (a == "--repeats" && i + 1 < argc) {
      o.repeats = std::max(5, std::stoi(argv[++i]));

    } else {
      throw std::invalid_argument("usage: rn50_bench_fused_conv [--batch N] [--repeats R (>= 5)]");
    }
  }
  return o;
}

at::Tensor nhwc(std::vector<int64_t> shape, double scale = 1.0) {
  return (at::randn(shape, at::TensorOptions(at::kCUDA).dtype(at::kFloat)) * scale)
      .to(at::kHalf)
      .contiguous(kChannelsLast);
}

BatchNormState make_state(int64_t c) {
  const auto f = at::TensorOptions(at::kCUDA).dtype(at::kFloat);
  BatchNormState s;
  s.weight = at::rand({c}, f) + 0.5;
  s.bias = at::rand({c}, f) - 0.5;
  s.running_mean = at::zeros({c}, f);
  s.running_var = at::ones({c}, f);
  s.num_batches_tracked = at::zeros({}, f.dtype(at::kLong));
  return s;
}

// Microseconds per call; -1 where the op failed (its error printed).
double us(const std::function<void(int)>& call, const Options& o, const char* what, const char* where) {
  try {
    return time_calls(call, kSets, o.repeats).seconds * 1e6;
  } catch (const std::exception& e) {
    std::printf("  %s %s: failed: %s\n", where, what, e.what());
    return -1;
  }
}

struct Row {
  double aten_fwd, bn_fwd, aten_dgrad, aten_wgrad, bn_bwd;       // the model now
  double graph_fwd, finalize, graph_wgrad, graph_dgrad_bn, dbn;  // the recipe
  double apply;                                                  // the block output's scale-bias-add-ReLU
  double sep_fwd = 0, sep_wgrad = 0;  // the prologue as a pass of its own, then the plain pattern (conv2, conv3)
};

Row bench(const ConvShape& s, const Options& o) {
  const int64_t n = o.batch, out = (s.size + 2 * (s.kernel / 2) - s.kernel) / s.stride + 1;
  const rn50::ops::ConvGeometry g{s.stride, s.kernel / 2};
  std::vector<at::Tensor> x, dy, y;
  for (int i = 0; i < kSets; ++i) {
    x.push_back(nhwc({n, s.cin, s.size, s.size}));
    dy.push_back(nhwc({n, s.cout, out, out}));
    y.push_back(nhwc({n, s.cout, out, out}));
  }
  const at::Tensor w = nhwc({s.cout, s.cin, s.kernel, s.kernel}, 0.05);
  BatchNormState next = make_state(s.cout), prev = make_state(s.cin);
  prev.weight.requires_grad_(false);
  const at::Tensor pscale = prev.weight.clone(), pshift = prev.bias.clone();
  const rn50::ops::Prologue prologue = s.prologue ? rn50::ops::Prologue{pscale, pshift} : rn50::ops::Prologue{};
  const at::Tensor mean = at::zeros({s.cin}, pscale.options()), invstd = at::ones({s.cin}, pscale.options());
  const bool relu = s.bn != Bn::kPlain, residual = s.bn == Bn::kResidual;
  Row r{};
  r.aten_fwd = us(
      [&](int i) {
        at::convolution(x[i], w, {}, {s.stride, s.stride}, {s.kernel / 2, s.kernel / 2}, {1, 1}, false, {0, 0}, 1);
      },
      o, "aten conv", s.where);
  r.bn_fwd = us(
      [&](int i) {
        torch::NoGradGuard no_grad;
        rn50::ops::batch_norm_act(y[i], next, residual ? dy[i] : at::Tensor(), relu);
      },
      o, "bn forward", s.where);
  const auto conv_grad = [&](int i, bool input, bool weight) {
    at::convolution_backward(dy[i], x[i], w, std::nullopt, {s.stride, s.stride}, {s.kernel / 2, s.kernel / 2}, {1, 1},
                             false, {0, 0}, 1, {input, weight, false});
  };
  r.aten_dgrad = us([&](int i) { conv_grad(i, true, false); }, o, "aten dgrad", s.where);
  r.aten_wgrad = us([&](int i) { conv_grad(i, false, true); }, o, "aten wgrad", s.where);
  BatchNormState grad_state = make_state(s.cout);
  grad_state.weight.requires_grad_(true);
  grad_state.bias.requires_grad_(true);
  std::vector<at::Tensor> yg;
  for (const at::Tensor& t : y) yg.push_back(t.detach().requires_grad_(true));
  r.bn_bwd = us(
      [&](int i) {
        const at::Tensor z = rn50::ops::batch_norm_act(yg[i], grad_state, residual ? dy[i] : at::Tensor(), relu);
        torch::autograd::grad({z}, {yg[i], grad_state.weight, grad_state.bias}, {dy[i]});
      },
      o, "bn forward+backward", s.where);
  if (r.bn_bwd >= 0 && r.bn_fwd >= 0) r.bn_bwd -= r.bn_fwd;

  r.graph_fwd = us([&](int i) { rn50::ops::conv_forward_stats(x[i], w, g, prologue); }, o, "graph conv+stats", s.where);
  std::printf("  %-16s %s\n", s.where, rn50::ops::last_plan_description().c_str());
  const rn50::ops::ConvStats stats = rn50::ops::conv_forward_stats(x[0], w, g, prologue);
  r.finalize =
      us([&](int) { rn50::ops::bn_finalize(stats.sum, stats.sq_sum, n * out * out, next); }, o, "finalize", s.where);
  r.graph_wgrad = us([&](int i) { rn50::ops::conv_backward_filter(x[i], dy[i], w.sizes(), g, prologue); }, o,
                     "graph wgrad", s.where);
  std::printf("  %-16s %s\n", s.where, rn50::ops::last_plan_description().c_str());
  if (s.prologue) {
    const rn50::ops::Prologue separate{pscale, pshift, rn50::ops::PrologueRun::kSeparate};
    r.sep_fwd =
        us([&](int i) { rn50::ops::conv_forward_stats(x[i], w, g, separate); }, o, "separate conv+stats", s.where);
    r.sep_wgrad = us([&](int i) { rn50::ops::conv_backward_filter(x[i], dy[i], w.sizes(), g, separate); }, o,
                     "separate wgrad", s.where);
    r.graph_dgrad_bn = us(
        [&](int i) {
          rn50::ops::conv_backward_data_bn(dy[i], w, {x[i], mean, invstd, prev.weight, prev.bias}, g);
        },
        o, "graph dgrad+drelu+dbn", s.where);
    std::printf("  %-16s %s\n", s.where, rn50::ops::last_plan_description().c_str());
    rn50::ops::DgradBn d;
    d.dz = x[0];
    d.eq_dy = pscale;
    d.eq_x = pshift;
    d.eq_bias = pshift;
    r.dbn = us([&](int i) { rn50::ops::dbn_apply(d, x[i]); }, o, "dbn_apply", s.where);
  }
  if (residual) {
    r.apply = us([&](int i) { rn50::ops::bn_apply(y[i], next.weight, next.bias, true, dy[i]); }, o, "apply", s.where);
  }
  c10::cuda::CUDACachingAllocator::emptyCache();
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const Options o = parse(argc, argv);
    if (!torch::cuda::is_available()) {
      std::fprintf(stderr, "rn50_bench_fused_conv: no CUDA device\n");
      return 1;
    }
    rn50::cuda::use_side_stream(0);
    at::globalContext().setBenchmarkCuDNN(true);  // the model's autotuning: ATen's convolutions at their best
    const auto* prop = at::cuda::getCurrentDeviceProperties();
    std::printf(
        "rn50_bench_fused_conv: %s, ResNet-50's bottleneck convolutions at batch %lld, float16 channels-last, "
        "us per op (median of %d graph replays over %d input sets)\n",
        prop->name, static_cast<long long>(o.batch), o.repeats, kSets);
    std::vector<Row> rows;
    for (const ConvShape& s : kConvs) rows.push_back(bench(s, o));
    std::printf("\n%-16s %5s %5s %3s %2s %3s | %8s %7s %8s %8s %7s | %8s %6s %8s %9s %6s %6s | %7s %7s\n", "conv",
                "Cin", "Cout", "HW", "k", "cnt", "aten fwd", "bn fwd", "dgrad", "wgrad", "bn bwd", "g fwd+st", "final",
                "g wgrad", "g dgrad+bn", "dbn", "apply", "s fwd", "s wgrad");
    double now = 0, recipe = 0, timed = 0;
    bool complete = true;
    for (size_t i = 0; i < rows.size(); ++i) {
      const ConvShape& s = kConvs[i];
      const Row& r = rows[i];
      std::printf(
          "%-16s %5lld %5lld %3lld %2lld %3d | %8.1f %7.1f %8.1f %8.1f %7.1f | %8.1f %6.1f %8.1f %9.1f %6.1f %6.1f | "
          "%7.1f %7.1f\n",
          s.where, static_cast<long long>(s.cin), static_cast<long long>(s.cout), static_cast<long long>(s.size),
          static_cast<long long>(s.kernel), s.count, r.aten_fwd, r.bn_fwd, r.aten_dgrad, r.aten_wgrad, r.bn_bwd,
          r.graph_fwd, r.finalize, r.graph_wgrad, r.graph_dgrad_bn, r.dbn, r.apply, r.sep_fwd, r.sep_wgrad);
      for (const double v :
           {r.aten_fwd, r.bn_fwd, r.aten_dgrad, r.aten_wgrad, r.bn_bwd, r.graph_fwd, r.finalize, r.graph_wgrad}) {
        complete &= v >= 0;
      }
      if (s.prologue) complete &= r.graph_dgrad_bn >= 0 && r.sep_fwd >= 0 && r.sep_wgrad >= 0;
      // The model now: the convolution, its gradients, the BatchNorm after it, forward and backward.
      now += s.count * (r.aten_fwd + r.bn_fwd + r.aten_dgrad + r.aten_wgrad + r.bn_bwd);
      // The recipe: the ReLU BatchNorms (bn1, bn2) vanish into the next convolution's prologue and data gradient;
      // the block output keeps an apply pass forward and rn50's backward kernel (bn3 with the residual, and the
      // downsample's, whose apply is part of bn3's).
      double fused = r.graph_fwd + r.finalize + r.graph_wgrad;
      fused += s.prologue ? r.graph_dgrad_bn + r.dbn : r.aten_dgrad;
      if (s.bn != Bn::kRelu) fused += r.bn_bwd + (s.bn == Bn::kResidual ? r.apply : 0.0);
      recipe += s.count * fused;
      // conv_prologue: timed: the faster form of each prologue pattern (conv2 and conv3, forward and weight gradient).
      if (s.prologue) {
        fused += std::min(0.0, r.sep_fwd - r.graph_fwd) + std::min(0.0, r.sep_wgrad - r.graph_wgrad);
      }
      timed += s.count * fused;
    }
    std::printf(
        "\nnetwork (52 convolutions and their BatchNorms, forward and backward): model now %.2f ms, recipe "
        "%.2f ms (%+.1f%%), recipe with each prologue where it is faster %.2f ms (%+.1f%%)%s\n",
        now / 1e3, recipe / 1e3, 100.0 * (recipe - now) / now, timed / 1e3, 100.0 * (timed - now) / now,
        complete ? "" : "; INCOMPLETE: some ops failed (above), their time counted as -1");
    return complete ? 0 : 3;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rn50_bench_fused_conv: %s\n", e.what());
    return 1;
  }
}
