// commands/bench_decode.cpp: `rn50 bench-decode`: images/s of JPEG decoding + augmentation alone, on this CPU (per
// core and on all cores) or on the GPU (--decode gpu), as training does it (input/decode_bench.h).
#include <cxxopts.hpp>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "commands/command.h"
#include "commands/model_step.h"
#include "core/affinity.h"
#include "core/config.h"
#include "core/errors.h"
#include "core/launch_env.h"
#include "core/log.h"
#include "cuda/device_ops.h"
#include "models/model.h"
#include "bench/decode/cpu_decode_bench.h"
#include "bench/decode/gpu_decode_bench.h"
#include "monitor/utilisation.h"

namespace rn50::commands {
namespace {

// The GPU decode bench's figures, as `rn50 bench-decode --decode gpu` prints them.
void print_gpu_decode_bench(const bench::GpuDecodeBenchResult& g, const std::vector<std::vector<uint8_t>>& jpegs,
                            int size) {
  std::printf("files %zu, mean %.1f KiB; output %dx%d; batches of %d into half-precision channels-last input\n",
              jpegs.size(), bench::mean_kib(jpegs), size, size, g.batch_size);
  std::printf("%s\n", g.routes.c_str());
  std::printf("train (RandomResizedCrop + flip), GPU decode + augment: %8.0f img/s\n", g.train_per_s);
  std::printf("val (resize + centre crop), GPU decode + augment:       %8.0f img/s\n", g.val_per_s);
  std::printf("images by route: hardware decoder %lld, nvJPEG default backend %lld, libjpeg %lld\n",
              static_cast<long long>(g.hardware), static_cast<long long>(g.hybrid),
              static_cast<long long>(g.cpu_fallback));
  // Against 1e6 / rate us per image: little waiting means the host's work is what limits the rate.
  std::printf(
      "decode thread: %.1f us per image working (routing %.1f, nvJPEG's hardware calls %.1f), "
      "%.1f us waiting for the device\n",
      g.host_us_per_image, g.route_us_per_image, g.hardware_us_per_image, g.wait_us_per_image);
  std::printf(
      "per batch, from CUDA events: submit to ready %.2f ms (nvJPEG's host calls included), crop kernel "
      "%.2f ms\n",
      g.decode_latency_ms_per_batch, g.crop_ms_per_batch);
  if (g.step_ms > 0) {                                            // measured only with --step-ms or --step-model
    const double decode_ms = 1e3 * g.batch_size / g.train_per_s;  // a train batch alone, from above
    auto verdict = [&](double ms) {
      return ms - g.step_ms < 0.5 * decode_ms ? "overlaps the step" : "does not overlap the step";
    };
    std::printf("with a step of %.2f ms (decode alone %.2f ms per batch), per batch:\n", g.step_ms, decode_ms);
    std::printf("  each decode queued right after the step before its use:   %.2f ms: decoding %s\n",
                g.step_then_decode_ms, verdict(g.step_then_decode_ms));
    std::printf("  each decode submitted %d batches ahead (training's default): %.2f ms: decoding %s\n",
                g.decode_ahead_batches, g.decode_ahead_ms, verdict(g.decode_ahead_ms));
    std::printf("  nvJPEG's hardware calls beside the step: %.1f us per image (alone %.1f)\n",
                g.ahead_hardware_us_per_image, g.hardware_us_per_image);
  }
}

// --decode gpu: the stage as training runs it, `repeat` times with a new decoder each, and their spread.
int bench_gpu(const cxxopts::ParseResult& parsed, const std::vector<std::vector<uint8_t>>& jpegs, int size,
              double seconds, int repeat) {
  widen_cuda_hardware_queues();  // as training with decode: gpu does
  const std::string device = parsed["device"].as<std::string>();
  if (device.rfind("cuda", 0) != 0) {
    throw ConfigError("--decode gpu needs a CUDA --device (got '" + device + "')");
  }
  init_logging("", 0);
  const int batch_size = parsed["batch-size"].as<int>();
  double step_ms = parsed["step-ms"].as<double>();
  if (step_ms < 0) throw ConfigError("--step-ms must not be negative");
  // --step-model: that model's own training step beside the decode (the doctor's), its time measured here.
  std::unique_ptr<ModelStep> model_step;
  int out_channels = 3;
  if (parsed.count("step-model")) {
    const std::string model = parsed["step-model"].as<std::string>();
    const auto known = models::names();
    if (std::find(known.begin(), known.end(), model) == known.end())
      throw ConfigError("--step-model: unknown model '" + model + "'");
    if (step_ms > 0) throw ConfigError("--step-ms and --step-model exclude each other");
    if (batch_size != ModelStep::kGpuBatchSize)
      throw ConfigError(strprintf("--step-model steps batches of %d: --batch-size must be %d too",
                                  ModelStep::kGpuBatchSize, ModelStep::kGpuBatchSize));
    cuda::use_side_stream(gpu_index(device));
    ModelStep::Options step_options;
    step_options.cuda_graph = parsed.count("step-eager") == 0;
    step_options.wgrad_stream = parsed.count("step-wgrad-inline") == 0;
    model_step = std::make_unique<ModelStep>(model, device, step_options);
    step_ms = 1e3 * model_step->batch_size() / model_step->images_per_s(false);
    out_channels = static_cast<int>(models::input_channels(model, ModelStep::kStemChannels));
    std::printf("beside %s's training step (%s%s): %.2f ms a step of %d\n", model.c_str(),
                step_options.cuda_graph ? "CUDA graph" : "eager",
                step_options.wgrad_stream ? "" : ", weight gradients in line", step_ms, model_step->batch_size());
  } else if (parsed.count("step-eager") || parsed.count("step-wgrad-inline")) {
    throw ConfigError("--step-eager and --step-wgrad-inline are for --step-model");
  }
  bench::QueueStep queue_step;
  if (model_step) queue_step = [&] { model_step->queue(); };
  if (const int offset = parsed["decode-stream-offset"].as<int>(); offset > 0)
    cuda::skip_high_priority_streams(gpu_index(device), offset);
  input::GpuDecoderOptions decoder;
  decoder.hardware_no_pipeline = parsed.count("nvjpeg-no-pipeline") > 0;
  decoder.planar = parsed.count("decode-yuv") > 0;
  const int cpu_load = parsed["cpu-load"].as<int>();
  if (cpu_load < 0) throw ConfigError("--cpu-load must not be negative");
  // Decode threads busy beside the GPU's decoder, as the loader's keep a training run's CPU (decode_cpu_share).
  std::unique_ptr<bench::CpuDecodeLoad> load;
  if (cpu_load > 0) load = std::make_unique<bench::CpuDecodeLoad>(jpegs, size, cpu_load);
  const auto g = bench::run_gpu_decode_bench(jpegs, size, batch_size, seconds, gpu_index(device), step_ms, decoder,
                                             out_channels, queue_step);
  if (load) {
    std::printf("beside %d CPU decode threads on rn50's train path, which decoded %.0f img/s meanwhile\n", cpu_load,
                load->stop());
  }
  print_gpu_decode_bench(g, jpegs, size);
  if (repeat == 1) return 0;
  // A new decoder (nvJPEG handle and states) each time: decoders of one process can differ by more than 1.5x
  // (docs/gpu-decoding.md).
  std::vector<double> train_rates{g.train_per_s};
  for (int r = 2; r <= repeat; ++r) {
    const auto again = bench::run_gpu_decode_bench(jpegs, size, batch_size, seconds, gpu_index(device), 0, decoder);
    std::printf("decoder %d of %d: train %8.0f img/s, val %8.0f img/s, nvJPEG's hardware calls %.1f us per image\n", r,
                repeat, again.train_per_s, again.val_per_s, again.hardware_us_per_image);
    train_rates.push_back(again.train_per_s);
  }
  std::sort(train_rates.begin(), train_rates.end());
  std::printf("train over %d decoders: min %.0f, median %.0f, max %.0f img/s\n", repeat, train_rates.front(),
              monitor::percentile_of_sorted(train_rates, 50), train_rates.back());
  return 0;
}

// CPU decoding: per core on rn50's path and on a full decode, then on all threads (again pinned with --pin).
int bench_cpu(const cxxopts::ParseResult& parsed, const std::vector<std::vector<uint8_t>>& jpegs, int size,
              double seconds) {
  const bool pin = parsed.count("pin") > 0;
  const int threads = parsed.count("threads") ? parsed["threads"].as<int>() : usable_cores();
  const auto r = bench::run_decode_bench(jpegs, size, threads, seconds, pin);
  std::printf("files %d, mean %.0fx%.0f, %.1f KiB; output %dx%d\n", r.files, r.mean_width, r.mean_height, r.mean_kib,
              r.output_size, r.output_size);
  std::printf("train (RandomResizedCrop, region + DCT-scaled decode), 1 core: %8.0f img/s\n", r.train_per_core);
  std::printf("val (resize + centre crop, region + DCT-scaled decode), 1 core: %6.0f img/s\n", r.val_per_core);
  std::printf("full decode, then crop and resize, 1 core:                  %8.0f img/s\n", r.full_decode_per_core);
  std::printf("train, %d threads:                                           %8.0f img/s\n", r.threads,
              r.train_all_threads);
  if (pin && r.pinned_failures > 0)
    std::printf("train, %d threads pinned: %d of them could not be pinned; not measured\n", r.threads,
                r.pinned_failures);
  else if (pin)
    std::printf("train, %d threads, pinned in turn to the usable CPUs:         %8.0f img/s\n", r.threads,
                r.train_all_threads_pinned);
  return 0;
}

}  // namespace

int bench_decode_command(int argc, char** argv) {
  cxxopts::Options options("rn50 bench-decode",
                           "Images/s of JPEG decoding + augmentation: on this CPU (per core and on all cores), or on "
                           "the GPU with --decode gpu.");
  options.add_options()("data-root", "decode files from this folder instead of generated 500x375 JPEGs",
                        cxxopts::value<std::string>())("files", "number of files",
                                                       cxxopts::value<int>()->default_value("64"))(
      "threads", "threads for the all-core figure (default: usable cores)", cxxopts::value<int>())(
      "seconds", "seconds per measurement", cxxopts::value<double>()->default_value("3"))(
      "size", "output side", cxxopts::value<int>()->default_value("224"))(
      "decode", "cpu (libjpeg-turbo) or gpu (nvJPEG and rn50's kernel, as decode: gpu trains)",
      cxxopts::value<std::string>()->default_value("cpu"))("batch-size", "--decode gpu: images per batch",
                                                           cxxopts::value<int>()->default_value("256"))(
      "step-ms",
      "--decode gpu: also time the train batches with a simulated step of this many ms (matrix products), "
      "queued right before each decode, and with each decode submitted as many batches ahead as training does (0: not)",
      cxxopts::value<double>()->default_value("0"))(
      "step-model",
      "--decode gpu: as --step-ms, with this registered model's own training step (the doctor's: configs/"
      "optimized.yaml's compute switches, batch 256, a CUDA graph) instead of matrix products",
      cxxopts::value<std::string>())("step-eager", "--step-model: its step without the CUDA graph")(
      "step-wgrad-inline",
      "--step-model: its weight gradients in line on one stream (the graph without the second stream's branches)")(
      "decode-stream-offset",
      "--decode gpu: take this many of LibTorch's high-priority pool streams before the decoder takes its own, so that "
      "its streams land on other CUDA hardware queues (a probe of which queue meets the step's graph; 0 to 31)",
      cxxopts::value<int>()->default_value("0"))(
      "nvjpeg-no-pipeline", "--decode gpu: the hardware decoder with NVJPEG_FLAGS_HW_DECODE_NO_PIPELINE")(
      "cpu-load",
      "--decode gpu: this many threads decode the files on the CPU meanwhile (as the loader's decode threads keep a "
      "training run's CPU busy), to see whether GPU decoding slows with them",
      cxxopts::value<int>()->default_value("0"))(
      "decode-yuv",
      "--decode gpu: the hardware decoder hands out YCbCr planes, converted in rn50's kernel (as the "
      "config key decode_yuv)")("device", "--decode gpu: the GPU",
                                cxxopts::value<std::string>()->default_value("cuda:0"))(
      "repeat", "--decode gpu: measure this many times, each with a new decoder, and print the spread",
      cxxopts::value<int>()->default_value("1"))(
      "pin",
      "CPU decoding: measure the all-thread figure again (second) with thread k pinned to the k-th usable "
      "CPU, cycling")("h,help", "print this help");
  const auto parsed = parse_options(options, argc, argv);
  if (parsed.count("help")) {
    std::printf("%s\n", options.help().c_str());
    return 0;
  }
  const std::string decode_name = parsed["decode"].as<std::string>();
  if (decode_name != "cpu" && decode_name != "gpu")
    throw ConfigError("--decode must be cpu or gpu (got '" + decode_name + "')");
  const Decode decode = decode_name == "gpu" ? Decode::kGpu : Decode::kCpu;
  const int repeat = parsed["repeat"].as<int>();
  if (repeat < 1) throw ConfigError("--repeat must be at least 1 (got " + std::to_string(repeat) + ")");
  if (repeat > 1 && decode != Decode::kGpu) throw ConfigError("--repeat is for --decode gpu");
  if (parsed.count("pin") && decode != Decode::kCpu) throw ConfigError("--pin is for CPU decoding (--decode cpu)");
  if (parsed["cpu-load"].as<int>() != 0 && decode != Decode::kGpu) throw ConfigError("--cpu-load is for --decode gpu");
  // LibTorch's pools hand out 32 streams a priority in turn: offsets past 31 repeat those below.
  const int stream_offset = parsed["decode-stream-offset"].as<int>();
  if (stream_offset < 0 || stream_offset > 31)
    throw ConfigError(strprintf("--decode-stream-offset must be 0 to 31 (got %d)", stream_offset));
  if (stream_offset != 0 && decode != Decode::kGpu) throw ConfigError("--decode-stream-offset is for --decode gpu");
  if ((parsed.count("step-model") || parsed.count("step-eager") || parsed.count("step-wgrad-inline")) &&
      decode != Decode::kGpu)
    throw ConfigError("--step-model, --step-eager and --step-wgrad-inline are for --decode gpu");
  // Bounded before any work: a zero or negative count measured nothing and printed 0 img/s, a huge one ran until
  // killed.
  auto in_range = [&](const char* option, double value, double low, double high) {
    if (!(value >= low && value <= high)) {
      throw ConfigError(strprintf("--%s must be %.10g to %.10g (got %.10g)", option, low, high, value));
    }
  };
  const int files = parsed["files"].as<int>();
  in_range("files", files, 1, 100000);
  if (parsed.count("threads")) in_range("threads", parsed["threads"].as<int>(), 1, 1024);
  in_range("seconds", parsed["seconds"].as<double>(), 0.01, 3600);
  in_range("size", parsed["size"].as<int>(), 16, 4096);
  if (parsed.count("data-root")) check_input_folder("--data-root", parsed["data-root"].as<std::string>());
  const auto jpegs = parsed.count("data-root") ? bench::read_jpegs(parsed["data-root"].as<std::string>(), files)
                                               : bench::make_benchmark_jpegs(files, 500, 375, 7);
  if (jpegs.empty()) throw DataError("no JPEG files to decode");
  const int size = parsed["size"].as<int>();
  const double seconds = parsed["seconds"].as<double>();
  return decode == Decode::kGpu ? bench_gpu(parsed, jpegs, size, seconds, repeat)
                                : bench_cpu(parsed, jpegs, size, seconds);
}

}  // namespace rn50::commands
