// bench/ops/bench_fused_batch_norm.cpp: rn50_bench_fused_bn, a benchmark (not a test): ResNet-50's 53 BatchNorms at
// batch 256 in float16 channels-last, timed as ATen's unfused ops (as the model runs them), rn50's fused kernels and
// cuDNN's, forward and forward+backward, each captured in a CUDA graph over rotating input sets (the trainer replays a
// graph too); prints GB/s per shape and the sum over the network.
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "cuda/cuda_check.h"
#include "cuda/cuda_event.h"
#include "cuda/device_ops.h"
#include "ops/fused_batch_norm.h"
#include "bench/ops/graph_timing.h"

namespace {

using rn50::test::time_calls;
using rn50::test::Timing;
using rn50::ops::BatchNormState;
using rn50::ops::BnKernels;

// One distinct BatchNorm of ResNet-50 and how many of the 53 have its shape. Stem: 64@112x112. Stages of (3, 4, 6, 3)
// bottlenecks of widths 64, 128, 256, 512: bn1 and bn2 at the width with ReLU, bn3 at 4x the width with the residual
// and ReLU, the first block's downsample at 4x the width without either. Stride 2 sits in the first block's 3x3 of
// stages 2-4, so that block's bn1 runs at the previous stage's resolution.
struct BnShape {
  const char* where;
  int64_t channels, size;
  bool residual, relu;
  int count;
};

const BnShape kResNet50[] = {
    {"stem bn1", 64, 112, false, true, 1},     {"layer1 bn1,bn2", 64, 56, false, true, 6},
    {"layer1 bn3", 256, 56, true, true, 3},    {"layer1 downsample", 256, 56, false, false, 1},
    {"layer2.0 bn1", 128, 56, false, true, 1}, {"layer2 bn1,bn2", 128, 28, false, true, 7},
    {"layer2 bn3", 512, 28, true, true, 4},    {"layer2 downsample", 512, 28, false, false, 1},
    {"layer3.0 bn1", 256, 28, false, true, 1}, {"layer3 bn1,bn2", 256, 14, false, true, 11},
    {"layer3 bn3", 1024, 14, true, true, 6},   {"layer3 downsample", 1024, 14, false, false, 1},
    {"layer4.0 bn1", 512, 14, false, true, 1}, {"layer4 bn1,bn2", 512, 7, false, true, 5},
    {"layer4 bn3", 2048, 7, true, true, 3},    {"layer4 downsample", 2048, 7, false, false, 1},
};

struct Options {
  int64_t batch = 256;
  int repeats = 30;
  at::ScalarType dtype = at::kHalf;
};

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw std::invalid_argument(a + " needs a value");
      return argv[++i];
    };
    if (a == "--batch") {
      o.batch = std::stoll(value());
    } else if (a == "--repeats") {
      o.repeats = std::max(20, std::stoi(value()));
    } else if (a == "--dtype") {
      const std::string d = value();
      o.dtype = d == "float16" ? at::kHalf : d == "bfloat16" ? at::kBFloat16 : d == "float32" ? at::kFloat : at::kByte;
      if (o.dtype == at::kByte) throw std::invalid_argument("--dtype takes float16, bfloat16 or float32");
    } else {
      throw std::invalid_argument(
          "usage: rn50_bench_fused_bn [--batch N] [--repeats R (>= 20)] [--dtype float16|bfloat16|float32]");
    }
  }
  return o;
}

struct Sets {
  std::vector<at::Tensor> x, residual, dy;
};

BatchNormState make_state(int64_t c) {
  const auto f = torch::TensorOptions().device(torch::kCUDA).dtype(torch::kFloat);
  BatchNormState s;
  s.weight = torch::ones({c}, f).requires_grad_(true);
  s.bias = torch::zeros({c}, f).requires_grad_(true);
  s.running_mean = torch::zeros({c}, f);
  s.running_var = torch::ones({c}, f);
  s.num_batches_tracked = torch::zeros({}, f.dtype(torch::kLong));
  return s;
}

struct Row {
  Timing forward, both;
  std::string note;
};

Row bench(const BnShape& shape, const Sets& sets, BnKernels kernels, const Options& o) {
  Row row;
  const at::Tensor& x0 = sets.x[0];
  if (kernels == BnKernels::kCudnn) {
    const std::string why = rn50::ops::cudnn_unsupported_reason(x0, shape.residual, shape.relu);
    if (!why.empty()) {
      row.note = "cuDNN: " + why;
      return row;
    }
  }
  BatchNormState state = make_state(shape.channels);
  const int n = static_cast<int>(sets.x.size());
  // The model's unfused ops: batch_norm, then add_ and relu_ in place (batch_norm_act's ATen path).
  const auto forward = [&](int i) {
    torch::NoGradGuard no_grad;
    rn50::ops::batch_norm_act(sets.x[i], state, shape.residual ? sets.residual[i] : at::Tensor(), shape.relu, kernels);
  };
  const auto both = [&](int i) {
    const at::Tensor y = rn50::ops::batch_norm_act(sets.x[i], state, shape.residual ? sets.residual[i] : at::Tensor(),
                                                   shape.relu, kernels);
    std::vector<at::Tensor> wrt = {sets.x[i], state.weight, state.bias};
    if (shape.residual) wrt.push_back(sets.residual[i]);
    torch::autograd::grad({y}, wrt, {sets.dy[i]});
  };
  row.forward = time_calls(forward, n, o.repeats);
  row.both = time_calls(both, n, o.repeats);
  c10::cuda::CUDACachingAllocator::emptyCache();
  return row;
}

// Bytes each tensor read or written once: forward x (+ residual) in, y out; backward dy, x (+ y for the ReLU's mask)
// in, dx (+ the residual's gradient) out.
double forward_bytes(const BnShape& s, double tensor) { return tensor * (2 + (s.residual ? 1 : 0)); }
double backward_bytes(const BnShape& s, double tensor) {
  return tensor * (3 + (s.relu ? 1 : 0) + (s.residual ? 1 : 0));
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const Options o = parse(argc, argv);
    if (!torch::cuda::is_available()) {
      std::fprintf(stderr, "rn50_bench_fused_bn: no CUDA device\n");
      return 1;
    }
    rn50::cuda::use_side_stream(0);  // capture refuses the default stream
    const auto* prop = at::cuda::getCurrentDeviceProperties();
    const double l2 = static_cast<double>(prop->l2CacheSize);
    const int elem = static_cast<int>(c10::elementSize(o.dtype));
    std::printf(
        "rn50_bench_fused_bn: %s, %d SMs, L2 %.0f MB; ResNet-50's BatchNorms at batch %lld, %s, channels-last; "
        "median of %d graph replays; GB/s counts each tensor read or written once\n",
        prop->name, prop->multiProcessorCount, l2 / 1e6, static_cast<long long>(o.batch), c10::toString(o.dtype),
        o.repeats);
    const BnKernels variants[3] = {BnKernels::kAten, BnKernels::kOwn, BnKernels::kCudnn};
    const char* names[3] = {"ATen unfused", "rn50 fused", "cuDNN fused"};
    std::printf("%-18s %5s %-11s %5s %6s |", "BatchNorm", "C", "op", "count", "MB");
    for (const char* name : names) std::printf(" %-12s fwd us  GB/s  f+b us  GB/s |", name);
    std::printf("\n");
    double total_fwd[3] = {}, total_both[3] = {}, bytes_fwd = 0, bytes_both = 0;
    bool cudnn_fell_back = false, eager = false;
    for (const BnShape& shape : kResNet50) {
      const auto opts = torch::TensorOptions().device(torch::kCUDA).dtype(o.dtype);
      const int64_t hw = shape.size * shape.size;
      const double tensor = static_cast<double>(o.batch * shape.channels * hw * elem);
      // Enough input sets that the calls between two uses of one set move three times the L2's size.
      const int n_sets = static_cast<int>(
          std::min<double>(16, std::max<double>(3, std::ceil(3 * l2 / forward_bytes(shape, tensor)) + 1)));
      Sets sets;
      for (int i = 0; i < n_sets; ++i) {
        const auto shape4 = std::vector<int64_t>{o.batch, shape.channels, shape.size, shape.size};
        sets.x.push_back(torch::randn(shape4, opts).contiguous(at::MemoryFormat::ChannelsLast).requires_grad_(true));
        sets.residual.push_back(
            torch::randn(shape4, opts).contiguous(at::MemoryFormat::ChannelsLast).requires_grad_(true));
        sets.dy.push_back(torch::randn(shape4, opts).contiguous(at::MemoryFormat::ChannelsLast));
      }
      const char* op = shape.residual ? "bn+add+relu" : shape.relu ? "bn+relu" : "bn";
      std::printf("%-18s %5lld %-11s %5d %6.0f |", shape.where, static_cast<long long>(shape.channels), op, shape.count,
                  tensor / 1e6);
      Row rows[3];
      for (int v = 0; v < 3; ++v) {
        rows[v] = bench(shape, sets, variants[v], o);
        const Row& r = rows[v];
        if (!r.forward.ran) {
          std::printf(" %-12s %7s %5s %7s %5s |", "", "n/a", "", "n/a", "");
          continue;
        }
        eager = eager || !r.forward.graph || !r.both.graph;
        std::printf(" %-12s %7.1f %5.0f %7.1f %5.0f |", "", r.forward.seconds * 1e6,
                    forward_bytes(shape, tensor) / r.forward.seconds / 1e9, r.both.seconds * 1e6,
                    (forward_bytes(shape, tensor) + backward_bytes(shape, tensor)) / r.both.seconds / 1e9);
      }
      std::printf("\n");
      for (int v = 0; v < 3; ++v) {
        // cuDNN's total takes rn50's time where cuDNN refuses a shape (what kAuto runs).
        const Row& r = rows[v].forward.ran ? rows[v] : rows[1];
        if (!rows[v].forward.ran) {
          cudnn_fell_back = true;
          std::printf("    %s\n", rows[v].note.c_str());
        }
        total_fwd[v] += shape.count * r.forward.seconds;
        total_both[v] += shape.count * r.both.seconds;
      }
      bytes_fwd += shape.count * forward_bytes(shape, tensor);
      bytes_both += shape.count * (forward_bytes(shape, tensor) + backward_bytes(shape, tensor));
    }
    std::printf("%-18s %5s %-11s %5d %6s |", "all 53", "", "", 53, "");
    for (int v = 0; v < 3; ++v) {
      std::printf(" %-12s %7.0f %5.0f %7.0f %5.0f |", "", total_fwd[v] * 1e6, bytes_fwd / total_fwd[v] / 1e9,
                  total_both[v] * 1e6, bytes_both / total_both[v] / 1e9);
    }
    std::printf(
        "\nper training step (forward + backward of all 53): ATen %.2f ms, rn50 %.2f ms (%.2fx), cuDNN %.2f ms "
        "(%.2fx)%s%s\n",
        total_both[0] * 1e3, total_both[1] * 1e3, total_both[0] / total_both[1], total_both[2] * 1e3,
        total_both[0] / total_both[2], cudnn_fell_back ? "; cuDNN's total uses rn50's time where it refused" : "",
        eager ? "; some rows timed eagerly (capture failed: see stderr)" : "");
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rn50_bench_fused_bn: %s\n", e.what());
    return 1;
  }
}
