// bench/ops/bench_stem.cpp: rn50_bench_stem, a benchmark (not a test): ResNet-50's stem convolution (7x7, stride 2,
// padding 3, 64 filters on [batch, 3, 224, 224] float16 channels-last, cuDNN autotuned as configs/optimized.yaml runs
// it) with the image's 3 channels and zero-padded to 4 and 8 (stem_channels), forward and forward + weight gradient,
// each captured in a CUDA graph (bench/ops/graph_timing.h), padding included; one line each with the median
// milliseconds per call, and whether each padded form's output and weight gradient equal the unpadded ones'. Then the
// padded forms' forward on an image padded beforehand, and the padding alone: whether a gain is cuDNN's kernel and
// what the pad costs (an input path writing the padded image directly would save that).
#include <ATen/cuda/CUDAContext.h>
#include <torch/torch.h>

#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

#include "bench/ops/graph_timing.h"
#include "cuda/device_ops.h"
#include "models/stem.h"

namespace {

using rn50::test::time_calls;
using rn50::test::Timing;

constexpr int kRepeats = 30;  // graph replays; the median is printed

}  // namespace

int main(int argc, char** argv) {
  try {
    const int64_t batch = rn50::test::batch_option(argc, argv, "rn50_bench_stem");
    if (!torch::cuda::is_available()) {
      std::fprintf(stderr, "rn50_bench_stem: no CUDA device\n");
      return 1;
    }
    rn50::cuda::use_side_stream(0);  // capture refuses the default stream
    at::globalContext().setBenchmarkCuDNN(true);
    const auto opts = torch::TensorOptions().device(torch::kCUDA).dtype(at::kHalf);
    // Two input sets: at batch 256 each image batch is 77 MB, beyond the L2.
    const int sets = 2;
    std::vector<at::Tensor> x, dy;
    for (int i = 0; i < sets; ++i) {
      x.push_back(torch::randn({batch, 3, 224, 224}, opts).contiguous(at::MemoryFormat::ChannelsLast));
      dy.push_back(torch::randn({batch, 64, 112, 112}, opts).contiguous(at::MemoryFormat::ChannelsLast));
    }
    const at::Tensor weight =
        (torch::randn({64, 3, 7, 7}, opts) * 0.05).contiguous(at::MemoryFormat::ChannelsLast).requires_grad_(true);
    std::printf("rn50_bench_stem: %s; [%lld, 3, 224, 224] float16 channels-last, 7x7 stride 2, 64 filters, cuDNN "
                "autotuned; median of %d graph replays, the padding included\n",
                at::cuda::getCurrentDeviceProperties()->name, static_cast<long long>(batch), kRepeats);
    // The unpadded form's output and weight gradient, for the comparison.
    const at::Tensor y3 = rn50::models::stem_conv(x[0], weight, 3);
    const at::Tensor dw3 = torch::autograd::grad({y3}, {weight}, {dy[0]})[0];
    double base_forward = 0, base_both = 0;
    for (const int channels : {3, 4, 8}) {
      const at::Tensor y = rn50::models::stem_conv(x[0], weight, channels);
      const at::Tensor dw = torch::autograd::grad({y}, {weight}, {dy[0]})[0];
      const double y_off = ((y.to(at::kFloat) - y3.to(at::kFloat)).abs().max()).item<double>();
      const double dw_off = ((dw.to(at::kFloat) - dw3.to(at::kFloat)).norm() / dw3.to(at::kFloat).norm()).item<double>();
      const Timing forward = time_calls(
          [&](int i) {
            torch::NoGradGuard no_grad;
            rn50::models::stem_conv(x[i], weight, channels);
          },
          sets, kRepeats);
      const Timing both = time_calls(
          [&](int i) { torch::autograd::grad({rn50::models::stem_conv(x[i], weight, channels)}, {weight}, {dy[i]}); },
          sets, kRepeats);
      if (channels == 3) {
        base_forward = forward.seconds;
        base_both = both.seconds;
      }
      std::printf("%d input channels: forward %.3f ms (%.2fx), forward+weight gradient %.3f ms (%.2fx); against 3: "
                  "output max difference %.3g, weight gradient relative %.3g%s\n",
                  channels, forward.seconds * 1e3, base_forward / forward.seconds, both.seconds * 1e3,
                  base_both / both.seconds, y_off, dw_off,
                  forward.graph && both.graph ? "" : " (timed eagerly: capture failed, see stderr)");
    }
    for (const int channels : {4, 8}) {
      std::vector<at::Tensor> padded;
      for (const at::Tensor& image : x) padded.push_back(rn50::models::pad_channels(image, channels));
      const at::Tensor padded_weight = rn50::models::pad_channels(weight.detach(), channels);
      const Timing conv_alone = time_calls(
          [&](int i) { at::conv2d(padded[i], padded_weight, {}, {2, 2}, {3, 3}); }, sets, kRepeats);
      const Timing pad_alone = time_calls([&](int i) { rn50::models::pad_channels(x[i], channels); }, sets, kRepeats);
      std::printf("%d input channels, image padded beforehand: forward %.3f ms (%.2fx against 3); the image's padding "
                  "alone %.3f ms\n",
                  channels, conv_alone.seconds * 1e3, base_forward / conv_alone.seconds, pad_alone.seconds * 1e3);
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rn50_bench_stem: %s\n", e.what());
    return 1;
  }
}
