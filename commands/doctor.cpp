// commands/doctor.cpp: `rn50 doctor`: measures this instance (CPU decode, storage, copies, memory, matrix units,
// training steps of a registered model, ResNet-50 by default), reads its driver and network, and says why training
// here would be slow, before a long run.
#include <cxxopts.hpp>

#include <ATen/ATen.h>
#include <ATen/Context.h>
#include <torch/cuda.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include "bench/decode/cpu_decode_bench.h"
#include "bench/decode/gpu_decode_bench.h"
#include "commands/command.h"
#include "commands/model_step.h"
#include "core/affinity.h"
#include "core/clock.h"
#include "core/cost.h"
#include "core/errors.h"
#include "core/launch_env.h"
#include "core/limits.h"
#include "core/log.h"
#include "cuda/cuda_support.h"
#include "cuda/device_ops.h"
#include "doctor/driver_row.h"
#include "doctor/host_view.h"
#include "doctor/limit_rows.h"
#include "doctor/network_rows.h"
#include "doctor/pipeline_verdict.h"
#include "doctor/rows.h"
#include "doctor/storage_row.h"
#include "input/gpu_decode/gpu_decoder.h"
#include "models/model.h"
#include "monitor/devices.h"
#include "monitor/health.h"
#include "monitor/mig.h"
#include "monitor/nvml.h"
#include "monitor/utilisation.h"

namespace rn50::commands {
namespace {

struct DoctorOptions {
  std::string data_root;  // optional: measure reading this dataset (first read and cached)
  std::string device = "auto";
  std::string model = "resnet50";  // the model of the training-rate row
  bool json = false;
  bool quick = false;         // shorter measurements (tests, CPU machines)
  bool limits_only = false;   // the cores and limits rows alone, no measurements
  double price_per_hour = 0;  // optional: cost of an ImageNet epoch at the measured rate
};

using Row = doctor::ReportRow;
using doctor::data_pipeline_verdict;
using doctor::format_rate;
using doctor::format_report;
using doctor::limit_rows;
using doctor::PipelineRates;
using doctor::ProcessLimits;
using doctor::usable_cores_row;

// The registered models, for the help and the error of --model.
std::string model_list() {
  std::string out;
  for (const auto& name : models::names()) out += (out.empty() ? "" : ", ") + name;
  return out;
}

void sync(const c10::Device& device) {
  if (device.is_cuda()) torch::cuda::synchronize(device.index());
}

// Median of `repeats` timings of `work` (after one warm-up call), in seconds.
template <typename Work>
double time_median(const c10::Device& device, int repeats, Work&& work) {
  work();
  sync(device);
  std::vector<double> times;
  for (int i = 0; i < repeats; ++i) {
    const auto t = Clock::now();
    work();
    sync(device);
    times.push_back(seconds_since(t));
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

double matmul_tflops(const c10::Device& device, at::ScalarType dtype, bool tf32, int n) {
  at::globalContext().setAllowTF32CuBLAS(tf32);
  const auto a = at::randn({n, n}, at::TensorOptions(device).dtype(dtype));
  const auto b = at::randn({n, n}, at::TensorOptions(device).dtype(dtype));
  at::Tensor c = at::empty({n, n}, a.options());
  const double t = time_median(device, 5, [&] { at::mm_out(c, a, b); });
  at::globalContext().setAllowTF32CuBLAS(false);
  return 2.0 * n * n * static_cast<double>(n) / t / 1e12;
}

// One of the NVML health rows in the doctor's table, under `section`.
Row as_row(const char* section, const monitor::HealthRow& health) {
  return {section, health.check, health.value, health.verdict, health.note};
}

std::string fmt_rate(double x) { return format_rate(x) + " img/s"; }

// "; the median of 3 windows: 7294, 7460 and 7465 img/s" for the compute row's note ("" for one window).
std::string windows_text(const std::vector<double>& windows) {
  if (windows.size() < 2) return "";
  std::string out = "; the median of " + std::to_string(windows.size()) + " windows: ";
  for (size_t i = 0; i < windows.size(); ++i) {
    out += (i == 0 ? "" : i + 1 == windows.size() ? " and " : ", ") + format_rate(windows[i]);
  }
  return out + " img/s";
}

struct GpuDecodeRates {
  std::optional<double> alone;        // decode: gpu's stage alone
  std::optional<double> in_training;  // what training with it would get (doctor::gpu_decode_in_training)
};

constexpr char kGpuDecodeCheck[] = "JPEG decode+augment on the GPU";  // the row of decode: gpu's stage

// decode: gpu's stage on the doctor's JPEGs (batches of 256, nvJPEG and rn50's kernel), alone and beside the step
// training with it runs (`step`, whose rate is `model_rate` at batch 256), as rows; its rates where it ran, otherwise
// why not in `unavailable`. Beside the real step, since a stand-in of its length did not slow nvJPEG's calls as
// training's step does (docs/doctor.md). One decoder's measurement, though the rate differs between decoders
// (docs/gpu-decoding.md).
GpuDecodeRates gpu_decode_rates(std::vector<Row>& rows, const std::vector<std::vector<uint8_t>>& jpegs, int device,
                                bool quick, double model_rate, int channels, const bench::QueueStep& step,
                                std::string& unavailable) {
  constexpr int kBatch = ModelStep::kGpuBatchSize;
  const char* check = kGpuDecodeCheck;
  if (!input::built_with_nvjpeg()) {
    rows.push_back({"gpu", check, "not in this build", "info", "nvJPEG was not found when rn50 was built"});
    unavailable = "this build has no nvJPEG";
    return {};
  }
  try {
    const double step_ms = model_rate > 0 ? 1e3 * kBatch / model_rate : 0;
    const auto g =
        bench::run_gpu_decode_bench(jpegs, 224, kBatch, quick ? 0.5 : 2.0, device, step_ms, {}, channels, step);
    const std::string routes = g.routes.substr(0, g.routes.find(','));  // its first clause: the library and engines
    rows.push_back({"gpu", check, fmt_rate(g.train_per_s), "info", "alone; decode: gpu, batches of 256; " + routes});
    GpuDecodeRates rates{g.train_per_s, std::nullopt};
    if (step_ms > 0 && g.step_ms > 0 && g.decode_ahead_ms > 0) {
      rates.in_training = doctor::gpu_decode_in_training(model_rate, kBatch, g.step_ms, g.decode_ahead_ms);
      rows.push_back({"gpu", "GPU decode beside the model's step", fmt_rate(*rates.in_training), "info",
                      strprintf("what training would get: the step training with decode: gpu runs (%.1f ms alone) "
                                "took %.1f ms a batch with "
                                "the decode submitted %d ahead; nvJPEG's hardware calls %.0f us an image beside it, "
                                "%.0f alone",
                                g.step_ms, g.decode_ahead_ms, g.decode_ahead_batches, g.ahead_hardware_us_per_image,
                                g.hardware_us_per_image)});
    }
    return rates;
  } catch (const std::exception& e) {
    rows.push_back({"gpu", check, "failed", "warn", e.what()});
    unavailable = "its measurement failed";
    return {};
  }
}

// The doctor's measurements, row by row in the order of the report, and the verdicts drawn from them.
class Doctor {
 public:
  explicit Doctor(const DoctorOptions& options)
      : options_(options),
        quick_(options.quick),
        cores_(usable_cores()),
        cuda_(torch::cuda::is_available() && options.device != "cpu"),
        device_(cuda_ ? c10::Device(options.device == "auto" || options.device == "cuda" ? "cuda:0" : options.device)
                      : c10::Device(c10::kCPU)),
        gpu_decode_unavailable_(cuda_ ? "" : "no CUDA device"),
        limits_(read_limits(cuda_)) {}

  int run() {
    rows_.push_back(usable_cores_row(limits_));
    if (!options_.limits_only) {
      progress("the CPU's JPEG decode rate");
      cpu_rows();
    }
    for (const auto& row : limit_rows(limits_)) rows_.push_back(row);
    if (options_.limits_only) {
      std::printf("%s", format_report(rows_, options_.json).c_str());
      return 0;
    }
    if (!options_.data_root.empty()) {
      progress("reading " + options_.data_root);
      storage_row();
    }
    for (const auto& row : doctor::network_rows(doctor::read_network_facts(host_, cuda::built_with_cuda())))
      rows_.push_back(row);
    open_nvml();
    rows_.push_back(driver_row());
    if (cuda_) {
      progress("the GPU: links, health, copies");
      gpu_rows();
    } else {
      rows_.push_back({"gpu", "CUDA device", cuda::built_with_cuda() ? "none visible" : "none (CPU-only build)", "info",
                       "measurements below are of the CPU"});
    }
    progress("training steps of " + options_.model);
    compute_rows();
    if (cuda_) {
      progress("GPU decoding, alone and beside the model's step");
      gpu_decode_rows();
    }
    verdict_rows();
    std::printf("%s", format_report(rows_, options_.json).c_str());
    return 0;
  }

 private:
  // What the doctor measures now, on standard error (the report goes to standard output): a run takes minutes.
  static void progress(const std::string& what) {
    std::fprintf(stderr, "rn50 doctor: measuring %s ...\n", what.c_str());
  }

  // What a container or job scheduler allows this process; cores_ is the same count as usable_cores_row's.
  static ProcessLimits read_limits(bool cuda) {
    ProcessLimits limits;
    limits.hardware_cpus = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
    limits.affinity_cpus = static_cast<int>(usable_cpus().size());
    limits.cgroup = read_cgroup_limits();
    limits.physical_memory = physical_memory_bytes();
    limits.memlock = memlock_limit_bytes();
    limits.shm = filesystem_bytes("/dev/shm");
    limits.gpus = cuda ? static_cast<int>(torch::cuda::device_count()) : 0;
    return limits;
  }

  // CPU decode: what the data pipeline can feed, on the cores the usable-cores row counts.
  void cpu_rows() {
    jpegs_ = bench::make_benchmark_jpegs(quick_ ? 8 : 32, 500, 375, 7);
    decode_ = bench::run_decode_bench(jpegs_, 224, cores_, quick_ ? 0.2 : 1.0);
    rows_.push_back({"cpu", "JPEG decode+augment, 1 core",
                     strprintf("%.0f img/s (full decode: %.0f)", decode_.train_per_core, decode_.full_decode_per_core),
                     "info", strprintf("500x375, %.0f KiB JPEGs, RandomResizedCrop to 224", decode_.mean_kib)});
    rows_.push_back({"cpu", "JPEG decode+augment, all cores", fmt_rate(decode_.train_all_threads), "info",
                     strprintf("%d threads", cores_)});
  }

  void storage_row() {
    const auto read = doctor::read_storage(options_.data_root, quick_ ? (64 << 20) : (1LL << 30));
    rows_.push_back(doctor::storage_row(read, options_.data_root, decode_.train_all_threads, decode_.mean_kib));
  }

  // NVML, for the driver row and the GPU rows; on a CUDA device, that device as NVML numbers it (NVML numbers GPUs
  // its own way, ignoring CUDA_VISIBLE_DEVICES: found by UUID).
  void open_nvml() {
    nvml_ = monitor::open_nvml(&nvml_why_not_);
    if (nvml_ && cuda_) nvml_device_ = monitor::find_device_by_uuid(*nvml_, monitor::device_uuid(device_.index()));
  }

  // The driver this build's CUDA runtime needs and what this host has (NVML's answer, else /proc's), with the GPU's
  // kind and CUDA's forward-compatibility libraries; one line without a driver or a GPU.
  Row driver_row() {
    doctor::DriverFacts facts;
    facts.cuda_works = torch::cuda::is_available();
    facts.no_driver_reason = nvml_why_not_;
    try {
      if (const auto v = cuda::cuda_versions()) facts.runtime_cuda = v->runtime;
      if (nvml_) doctor::read_nvml_driver_facts(*nvml_, nvml_device_ ? nvml_device_->gpu : 0, facts);
    } catch (const std::exception& e) {
      return {"gpu", "NVIDIA driver", "unknown", "warn", e.what()};
    }
    if (!facts.driver) facts.driver = doctor::read_proc_driver_version(host_);
    facts.compat = doctor::read_compat_libraries(host_);
    return doctor::driver_row(facts);
  }

  void gpu_rows() {
    cuda::use_side_stream(device_.index());
    rows_.push_back({"gpu", "device", monitor::describe_device(device_.index()), "info", ""});
    rows_.push_back(
        {"gpu", "visible GPUs", std::to_string(torch::cuda::device_count()), "info", monitor::describe_links()});
    const char* queues = std::getenv("CUDA_DEVICE_MAX_CONNECTIONS");
    if (const std::string warning = cuda_hardware_queues_warning(queues); !warning.empty())
      rows_.push_back({"gpu", "CUDA hardware queues", queues, "warn", warning});
    nvml_rows();
    const size_t health_rows_at = rows_.size();  // the NVML health rows follow the MIG row
    copy_and_health_rows(health_rows_at);
    gpu_decode_rows_at_ = rows_.size();  // measured after the model (gpu_decode_rows), reported here
  }

  // decode: gpu alone and beside the step training with it runs, measured after the model's rate; its rows go with
  // the GPU's. That step has its weight gradients in line (wgrad_stream: auto with decode: gpu, trainer/options.h):
  // beside the graph's second-stream branches nvJPEG's calls took four times as long (docs/gpu-decoding.md).
  void gpu_decode_rows() {
    std::vector<Row> rows;
    std::unique_ptr<ModelStep> step;
    double rate = step_rate_;
    if (input::built_with_nvjpeg() && models::has_weight_gradient_stream(options_.model)) {
      model_step_.reset();  // its memory, before the second step's
      ModelStep::Options in_line{quick_};
      in_line.wgrad_stream = false;
      try {
        step = std::make_unique<ModelStep>(options_.model, device_.str(), in_line);
        rate = step->images_per_s(quick_);
      } catch (const std::exception& e) {  // as a failed decode measurement: a row, and no GPU path suggested
        rows_.insert(rows_.begin() + static_cast<std::ptrdiff_t>(gpu_decode_rows_at_),
                     Row{"gpu", kGpuDecodeCheck, "failed", "warn",
                         std::string("the step beside it: ") + e.what()});
        gpu_decode_unavailable_ = "its measurement failed";
        return;
      }
    }
    ModelStep* beside = step ? step.get() : model_step_.get();  // the model's own where the two would not differ
    gpu_decode_ = gpu_decode_rates(rows, jpegs_, device_.index(), quick_, rate,
                                   static_cast<int>(models::input_channels(options_.model, ModelStep::kStemChannels)),
                                   beside ? bench::QueueStep([beside] { beside->queue(); }) : bench::QueueStep(),
                                   gpu_decode_unavailable_);
    if (beside) torch::cuda::synchronize(device_.index());  // a failed measurement may leave steps queued
    rows_.insert(rows_.begin() + static_cast<std::ptrdiff_t>(gpu_decode_rows_at_), rows.begin(), rows.end());
  }

  // The MIG row of the device open_nvml found, or why NVML has none.
  void nvml_rows() {
    if (nvml_device_) {
      const std::string mig = monitor::describe_mig(*nvml_, static_cast<int>(nvml_device_->gpu));
      const size_t end_of_summary = mig.find('\n');
      rows_.push_back({"gpu", "MIG", mig.substr(0, end_of_summary), "info",
                       end_of_summary == std::string::npos ? "" : "'rn50 train --mig list' lists the instances"});
    } else {
      rows_.push_back(
          {"gpu", "NVML", "unavailable", "warn",
           nvml_ ? "NVML has no device with UUID " + monitor::device_uuid(device_.index()) : nvml_why_not_});
    }
  }

  // Host-to-device copies, pageable against pinned; NVML's health rows (read during copies) at `health_rows_at`;
  // device memory bandwidth.
  void copy_and_health_rows(size_t health_rows_at) {
    const int64_t bytes = quick_ ? (64 << 20) : (512 << 20);
    const auto dev = at::empty({bytes}, at::TensorOptions(device_).dtype(at::kByte));
    const auto pageable = at::empty({bytes}, at::kByte).fill_(1);
    const auto pinned = at::empty({bytes}, at::TensorOptions(at::kByte).pinned_memory(true)).fill_(1);
    const double pageable_gbs = bytes / time_median(device_, 5, [&] { dev.copy_(pageable); }) / 1e9;
    const double pinned_gbs = bytes / time_median(device_, 5, [&] { dev.copy_(pinned, /*non_blocking=*/true); }) / 1e9;
    rows_.push_back(
        {"gpu", "host->device, pageable / pinned", strprintf("%.1f / %.1f GB/s", pageable_gbs, pinned_gbs),
         pinned_gbs < 10 ? "warn" : "ok",
         pinned_gbs < 10 ? "below a PCIe 4.0 x16 link's ~25 GB/s: a narrow or slow link, or a shared host" : ""});
    if (nvml_device_) {
      // Read while about 0.2 s of pinned copies run: an idle GPU may lower its PCIe link generation.
      const int copies = std::clamp(static_cast<int>(0.2 * pinned_gbs * 1e9 / bytes) + 1, 1, 64);
      for (int i = 0; i < copies; ++i) dev.copy_(pinned, /*non_blocking=*/true);
      std::vector<Row> health;
      try {
        for (const auto& r : monitor::nvml_health_rows(*nvml_, *nvml_device_, static_cast<unsigned>(::getpid())))
          health.push_back(as_row("gpu", r));
      } catch (const std::exception& e) {
        health.push_back({"gpu", "NVML health", "failed", "warn", e.what()});
      }
      sync(device_);
      rows_.insert(rows_.begin() + static_cast<std::ptrdiff_t>(health_rows_at), health.begin(), health.end());
    }
    const auto src = at::empty({bytes}, at::TensorOptions(device_).dtype(at::kByte)).fill_(3);
    const double d2d = 2.0 * bytes / time_median(device_, 10, [&] { dev.copy_(src); }) / 1e12;
    rows_.push_back(
        {"gpu", "device memory bandwidth (copy)", strprintf("%.2f TB/s", d2d), "info", "bytes read + written"});
  }

  // Matrix units, and the model's training steps with NVML's under-load reading taken while they run.
  void compute_rows() {
    const int n = cuda_ ? (quick_ ? 4096 : 8192) : (quick_ ? 256 : 1024);
    const double fp32 = matmul_tflops(device_, at::kFloat, false, n);
    rows_.push_back({"compute", "matrix product FP32", strprintf("%.3g TFLOP/s", fp32), "info", strprintf("%d^3", n)});
    if (cuda_) {
      const double tf32 = matmul_tflops(device_, at::kFloat, true, n);
      const double bf16 = matmul_tflops(device_, at::kBFloat16, false, n);
      rows_.push_back({"compute", "matrix product TF32 / BF16", strprintf("%.0f / %.0f TFLOP/s", tf32, bf16),
                       bf16 < 4 * fp32 ? "warn" : "ok",
                       bf16 < 4 * fp32
                           ? "low-precision matrix units far below their usual lead: clocks, power cap or a shared GPU"
                           : ""});
    }
    std::optional<monitor::HealthRow> under_load;
    model_step_ = std::make_unique<ModelStep>(options_.model, device_.str(), ModelStep::Options{quick_});
    std::vector<double> windows;
    step_rate_ = model_step_->images_per_s(
        quick_,
        [&] {
          if (!nvml_device_) return;
          try {
            under_load = monitor::under_load_row(*nvml_, *nvml_device_);
          } catch (const std::exception& e) {
            under_load = monitor::HealthRow{"under training load", "NVML failed", "warn", e.what()};
          }
        },
        &windows);
    rows_.push_back({"compute",
                     cuda_ ? options_.model + " training (fp16, channels-last, autotune, graph, fusion: conv" +
                                 (models::takes_stem_channels(options_.model) ? ", stem 4" : "") + ", b256)"
                           : strprintf("%s training (fp32, CPU, %lld px, b%d: a larger batch trains faster)",
                                       options_.model.c_str(), static_cast<long long>(model_step_->image_size()),
                                       model_step_->batch_size()),
                     fmt_rate(step_rate_), "info", "synthetic data: compute alone" + windows_text(windows)});
    if (under_load) rows_.push_back(as_row("compute", *under_load));
  }

  void verdict_rows() {
    rows_.push_back(data_pipeline_verdict({decode_.train_all_threads, decode_.train_per_core, cores_, step_rate_,
                                           gpu_decode_.alone, gpu_decode_unavailable_, gpu_decode_.in_training}));
    if (options_.price_per_hour <= 0) return;
    const double price = options_.price_per_hour;
    const double epoch_hours = kImageNetTrainImages / step_rate_ / 3600.0;
    rows_.push_back({"cost", "ImageNet epoch at this rate",
                     strprintf("%.2f h, %.3g at %.3g/h", epoch_hours, epoch_hours * price, price), "info",
                     strprintf("90 epochs: %.3g; %.3g per million images", 90 * epoch_hours * price,
                               cost_per_million_images(price, step_rate_))});
  }

  const DoctorOptions& options_;
  const bool quick_;
  const int cores_;
  const bool cuda_;
  const c10::Device device_;
  std::vector<Row> rows_;
  std::vector<std::vector<uint8_t>> jpegs_;
  bench::DecodeBenchResult decode_;
  const doctor::MachineView host_;                  // this machine's /sys, /proc, environment and loader
  std::unique_ptr<monitor::NvmlApi> nvml_;          // where the driver's NVML opens
  std::string nvml_why_not_;                        // why it does not
  std::optional<monitor::NvmlDevice> nvml_device_;  // the CUDA device's, where there is one
  std::unique_ptr<ModelStep> model_step_;           // the model's step, timed (and beside GPU decoding, where
                                                    // wgrad_stream does not act in the model)
  GpuDecodeRates gpu_decode_;                       // decode: gpu's stage, where measured
  size_t gpu_decode_rows_at_ = 0;                   // where its rows go
  std::string gpu_decode_unavailable_;
  const ProcessLimits limits_;
  double step_rate_ = 0;
};

}  // namespace

int doctor_command(int argc, char** argv) {
  cxxopts::Options options("rn50 doctor", "Measure this instance and say why training here would be slow.");
  DoctorOptions doctor;
  options.add_options()("data-root", "also measure reading this dataset folder", cxxopts::value<std::string>())(
      "device", "auto, cpu or cuda:N", cxxopts::value<std::string>()->default_value("auto"))(
      "model", "the model of the training-rate row: " + model_list(),
      cxxopts::value<std::string>()->default_value("resnet50"))(
      "json", "print JSON instead of a table")("quick", "shorter measurements")(
      "limits",
      "only the usable cores and the limits a container sets (quota, memory, memlock, /dev/shm): no "
      "measurements")("price-per-hour", "instance price (any currency): cost of an ImageNet epoch",
                      cxxopts::value<double>())(
      "compare",
      "PRICE_A,RATE_A,PRICE_B,RATE_B: cost per million images of instances A and B and the break-even speed-up "
      "of A over B (prices per hour, rates in img/s, 0 if unknown)",
      cxxopts::value<std::vector<double>>())("h,help", "print this help");
  const auto parsed = parse_options(options, argc, argv);
  if (parsed.count("help")) {
    std::printf("%s\n", options.help().c_str());
    return 0;
  }
  if (parsed.count("compare")) {
    const auto v = parsed["compare"].as<std::vector<double>>();
    if (v.size() != 4 || v[0] <= 0 || v[2] <= 0 || v[1] < 0 || v[3] < 0) {
      throw ConfigError("--compare needs PRICE_A,RATE_A,PRICE_B,RATE_B with positive prices");
    }
    std::printf("%s", compare_instances(v[0], v[1], v[2], v[3]).c_str());
    return 0;
  }
  if (parsed.count("data-root")) {
    doctor.data_root = parsed["data-root"].as<std::string>();
    check_input_folder("--data-root", doctor.data_root);  // before the measurements, which take a minute
  }
  doctor.device = parsed["device"].as<std::string>();
  if (doctor.device != "auto" && doctor.device != "cpu" && !is_cuda_device_name(doctor.device)) {
    throw ConfigError("--device '" + doctor.device + "': expected auto, cpu, cuda or cuda:N");
  }
  doctor.model = parsed["model"].as<std::string>();
  const auto known = models::names();
  if (std::find(known.begin(), known.end(), doctor.model) == known.end()) {
    throw ConfigError("--model: unknown model '" + doctor.model + "' (known: " + model_list() + ")");
  }
  doctor.json = parsed.count("json") > 0;
  doctor.quick = parsed.count("quick") > 0;
  doctor.limits_only = parsed.count("limits") > 0;
  if (parsed.count("price-per-hour")) doctor.price_per_hour = parsed["price-per-hour"].as<double>();
  if (doctor.price_per_hour < 0) throw ConfigError("--price-per-hour must not be negative");
  init_logging("", 0);
  // Before CUDA starts: GPU decoding beside a step is measured with the queues training with decode: gpu has (with
  // CUDA's 8 a decode a step ahead added 20% to a 40 ms step, docs/gpu-decoding.md); a value the user set is kept,
  // and its row warns.
  widen_cuda_hardware_queues();
  return Doctor(doctor).run();
}

}  // namespace rn50::commands
