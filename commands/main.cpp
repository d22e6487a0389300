// commands/main.cpp: the rn50 command: subcommand dispatch and the one place errors become exit codes.
#include <cxxopts.hpp>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "core/config.h"
#include "core/errors.h"
#include "core/launch_env.h"
#include "core/log.h"
#include "data/sample_maker.h"
#include "input/decode_bench.h"
#include "input/gpu_decode/gpu_decode_bench.h"
#include "monitor/mig.h"
#include "monitor/nvml.h"
#include "monitor/utilisation.h"
#include "models/model.h"
#include "engine/checkpoint.h"
#include "engine/cost.h"
#include "commands/doctor.h"
#include "commands/infer.h"
#include "parallel/launch.h"
#include "engine/trainer.h"

namespace {

std::string dashed(std::string name) {
  std::replace(name.begin(), name.end(), '_', '-');
  return name;
}

std::unique_ptr<rn50::monitor::NvmlApi> open_nvml_or_throw() {
  std::string why_not;
  auto nvml = rn50::monitor::open_nvml(&why_not);
  if (!nvml) throw rn50::ConfigError("config key 'mig': NVML is unavailable: " + why_not);
  return nvml;
}

int gpu_index(const std::string& device) {
  return device.rfind("cuda:", 0) == 0 ? std::stoi(device.substr(5)) : 0;
}

// Must run before anything touches CUDA: CUDA_VISIBLE_DEVICES is read once, when CUDA starts.
void pin_to_mig(rn50::Config& config, int world_size) {
  rn50::monitor::check_mig_compatible(world_size);
  const std::string uuid = rn50::monitor::select_mig(*open_nvml_or_throw(), gpu_index(config.device), config.mig);
  rn50::monitor::apply_mig_choice(uuid);
  config.device = "cuda:0";  // the instance is the only device the process sees
  std::fprintf(stderr, "rn50: pinned to MIG instance %s (CUDA_VISIBLE_DEVICES=%s)\n", uuid.c_str(), uuid.c_str());
}

// One of several processes of a data-parallel run: each takes the GPU of its local rank and its share of
// the host's cores.
void adapt_to_launch(rn50::Config& config, const rn50::LaunchEnv& launch) {
  if (config.device.rfind("cuda:", 0) == 0) {
    throw rn50::ConfigError("config key 'device': " + config.device + " would put all " +
                            std::to_string(launch.world_size) + " processes on one GPU; use 'cuda' or 'auto' "
                            "(each process takes cuda:LOCAL_RANK)");
  }
  if (config.workers == -1 && launch.local_world_size > 1) {
    config.workers = std::max(1, rn50::usable_cores() / launch.local_world_size);
  }
}

// `rn50 train`: every config key is also an option (--batch-size for batch_size).
int train_command(int argc, char** argv) {
  cxxopts::Options options("rn50 train", "Train a ResNet on an ImageNet-format folder (or synthetic data).");
  options.add_options()("config", "YAML file of config keys, applied before the options below",
                        cxxopts::value<std::string>())("h,help", "print this help");
  const rn50::Config defaults;
  for (const auto& key : rn50::config_keys()) {
    const std::string value = key.print(defaults);
    auto added = options.add_options("config keys (YAML name with _ for -)");
    const bool is_switch = value == "on" || value == "off";
    std::string help = key.help + " [default: " + (value.empty() ? "none" : value) + "]";
    if (is_switch) {
      added(dashed(key.name), help, cxxopts::value<std::string>()->implicit_value("on"));
    } else {
      added(dashed(key.name), help, cxxopts::value<std::string>());
    }
  }
  const auto parsed = options.parse(argc, argv);
  if (parsed.count("help")) {
    std::printf("%s\n", options.help({"", "config keys (YAML name with _ for -)"}).c_str());
    std::printf(
        "On/off keys: --key alone means on; write --key=off (with '=') to turn one off.\n"
        "tf32: LibTorch's default already runs cuDNN convolutions in TF32, so 'default' and 'off' are different\n"
        "baselines; 'off' is true FP32.\n");
    return 0;
  }
  if (!parsed.unmatched().empty()) {
    throw rn50::ConfigError("unexpected argument '" + parsed.unmatched().front() +
                            "' (on/off options take their value with '=', as in --pin-memory=off)");
  }
  rn50::Config config;
  if (parsed.count("config")) rn50::apply_yaml_file(config, parsed["config"].as<std::string>());
  std::map<std::string, std::string> overrides;
  for (const auto& key : rn50::config_keys()) {
    if (parsed.count(dashed(key.name))) overrides[key.name] = parsed[dashed(key.name)].as<std::string>();
  }
  rn50::apply_overrides(config, overrides);
  if (config.mig == "list") {
    std::printf("%s\n", rn50::monitor::describe_mig(*open_nvml_or_throw(), gpu_index(config.device)).c_str());
    return 0;
  }
  const rn50::LaunchEnv launch = rn50::read_launch_env();
  if (launch.world_size > 1) adapt_to_launch(config, launch);
  rn50::validate(config);
  // NCCL reads its variables when the communicator is created, later in this process.
  if (!config.nvlink) setenv("NCCL_P2P_DISABLE", "1", /*overwrite=*/1);
  if (config.decode == "gpu") rn50::widen_cuda_hardware_queues();  // before CUDA starts: see launch_env.h
  const auto models = rn50::models::names();
  if (std::find(models.begin(), models.end(), config.model) == models.end()) {
    rn50::models::create(config.model, {});  // throws the ConfigError that lists the known models
  }
  if (!config.mig.empty()) pin_to_mig(config, launch.world_size);
  std::filesystem::create_directories(config.out_dir);
  rn50::init_logging(config.out_dir + "/train.log", launch.rank);
  rn50::engine::train(config, launch);
  return 0;
}

int make_sample_command(int argc, char** argv) {
  cxxopts::Options options("rn50 make-sample", "Write a small ImageNet-format JPEG dataset with learnable classes.");
  rn50::data::SampleSpec spec;
  options.add_options()("out", "output folder", cxxopts::value<std::string>())(
      "classes", "number of classes", cxxopts::value<int>()->default_value(std::to_string(spec.classes)))(
      "per-class", "training images per class", cxxopts::value<int>()->default_value(std::to_string(spec.per_class)))(
      "val-per-class", "validation images per class",
      cxxopts::value<int>()->default_value(std::to_string(spec.val_per_class)))(
      "size", "image height in pixels (width is 4/3 of it)",
      cxxopts::value<int>()->default_value(std::to_string(spec.size)))(
      "noise", "fine noise in grey levels (0: 2 to 8 per image, files of about 35 KiB at --size 375; 20: about 95 KiB, "
      "ImageNet's size)", cxxopts::value<double>()->default_value("0"))(
      "seed", "random seed", cxxopts::value<uint64_t>()->default_value(std::to_string(spec.seed)))(
      "threads", "threads that render and encode (default: the cores this process may use)",
      cxxopts::value<int>()->default_value("0"))("h,help", "print this help");
  const auto parsed = options.parse(argc, argv);
  if (parsed.count("help")) {
    std::printf("%s\n", options.help().c_str());
    return 0;
  }
  if (!parsed.count("out")) throw rn50::ConfigError("make-sample needs --out DIR");
  spec.threads = parsed["threads"].as<int>();
  if (spec.threads < 0) throw rn50::ConfigError("make-sample: --threads must be 0 (all usable cores) or more");
  spec.out_dir = parsed["out"].as<std::string>();
  spec.classes = parsed["classes"].as<int>();
  spec.per_class = parsed["per-class"].as<int>();
  spec.val_per_class = parsed["val-per-class"].as<int>();
  spec.size = parsed["size"].as<int>();
  spec.noise = parsed["noise"].as<double>();
  spec.seed = parsed["seed"].as<uint64_t>();
  rn50::init_logging("", 0);
  const int64_t files = rn50::data::make_sample_dataset(spec);
  rn50::log_info(rn50::strprintf("wrote %lld images of %d classes to %s", static_cast<long long>(files), spec.classes,
                                 spec.out_dir.c_str()));
  return 0;
}

int export_command(int argc, char** argv) {
  cxxopts::Options options("rn50 export", "Write a checkpoint's weights as safetensors in torchvision's layout.");
  options.add_options()("checkpoint", "rn50 checkpoint (checkpoint.safetensors)", cxxopts::value<std::string>())(
      "out", "output .safetensors file", cxxopts::value<std::string>())("h,help", "print this help");
  const auto parsed = options.parse(argc, argv);
  if (parsed.count("help")) {
    std::printf("%s\nIn Python: model = torchvision.models.resnet50(num_classes=N);\n"
                "model.load_state_dict(safetensors.torch.load_file(OUT))\n", options.help().c_str());
    return 0;
  }
  if (!parsed.count("checkpoint") || !parsed.count("out")) throw rn50::ConfigError("export needs --checkpoint and --out");
  rn50::init_logging("", 0);
  rn50::engine::export_weights(parsed["checkpoint"].as<std::string>(), parsed["out"].as<std::string>());
  rn50::log_info("wrote " + parsed["out"].as<std::string>());
  return 0;
}

int infer_command(int argc, char** argv) {
  cxxopts::Options options("rn50 infer", "Logits of a stored batch from a weights file (evaluation mode, true FP32).");
  rn50::commands::InferOptions infer;
  options.add_options()("weights", "safetensors weights in torchvision's layout", cxxopts::value<std::string>())(
      "model", "model name (default: the weights' metadata, else resnet50)", cxxopts::value<std::string>())(
      "images", "safetensors file with an F32 tensor 'images' [N,3,H,W]", cxxopts::value<std::string>())(
      "out", "safetensors file for the F32 tensor 'logits'", cxxopts::value<std::string>())(
      "device", "cpu or cuda:N", cxxopts::value<std::string>()->default_value("cpu"))("h,help", "print this help");
  const auto parsed = options.parse(argc, argv);
  if (parsed.count("help")) {
    std::printf("%s\n", options.help().c_str());
    return 0;
  }
  if (!parsed.count("weights") || !parsed.count("images") || !parsed.count("out")) {
    throw rn50::ConfigError("infer needs --weights, --images and --out");
  }
  infer.weights = parsed["weights"].as<std::string>();
  infer.images = parsed["images"].as<std::string>();
  infer.out = parsed["out"].as<std::string>();
  infer.device = parsed["device"].as<std::string>();
  if (parsed.count("model")) infer.model = parsed["model"].as<std::string>();
  rn50::init_logging("", 0);
  rn50::commands::infer(infer);
  return 0;
}

int doctor_command(int argc, char** argv) {
  cxxopts::Options options("rn50 doctor", "Measure this instance and say why training here would be slow.");
  rn50::commands::DoctorOptions doctor;
  options.add_options()("data-root", "also measure reading this dataset folder", cxxopts::value<std::string>())(
      "device", "auto, cpu or cuda:N", cxxopts::value<std::string>()->default_value("auto"))(
      "json", "print JSON instead of a table")("quick", "shorter measurements")(
      "price-per-hour", "instance price (any currency): cost of an ImageNet epoch", cxxopts::value<double>())(
      "compare", "PRICE_A,RATE_A,PRICE_B,RATE_B: cost per million images of instances A and B and the break-even speed-up "
      "of A over B (prices per hour, rates in img/s, 0 if unknown)",
      cxxopts::value<std::vector<double>>())("h,help", "print this help");
  const auto parsed = options.parse(argc, argv);
  if (parsed.count("help")) {
    std::printf("%s\n", options.help().c_str());
    return 0;
  }
  if (parsed.count("compare")) {
    const auto v = parsed["compare"].as<std::vector<double>>();
    if (v.size() != 4 || v[0] <= 0 || v[2] <= 0 || v[1] < 0 || v[3] < 0) {
      throw rn50::ConfigError("--compare needs PRICE_A,RATE_A,PRICE_B,RATE_B with positive prices");
    }
    std::printf("%s", rn50::engine::compare_instances(v[0], v[1], v[2], v[3]).c_str());
    return 0;
  }
  if (parsed.count("data-root")) doctor.data_root = parsed["data-root"].as<std::string>();
  doctor.device = parsed["device"].as<std::string>();
  doctor.json = parsed.count("json") > 0;
  doctor.quick = parsed.count("quick") > 0;
  if (parsed.count("price-per-hour")) doctor.price_per_hour = parsed["price-per-hour"].as<double>();
  if (doctor.price_per_hour < 0) throw rn50::ConfigError("--price-per-hour must not be negative");
  rn50::init_logging("", 0);
  return rn50::commands::run_doctor(doctor);
}

// The GPU decode bench's figures, as `rn50 bench-decode --decode gpu` prints them.
void print_gpu_decode_bench(const rn50::input::GpuDecodeBenchResult& g, const std::vector<std::vector<uint8_t>>& jpegs,
                            int size) {
  std::printf("files %zu, mean %.1f KiB; output %dx%d; batches of %d into half-precision channels-last input\n",
              jpegs.size(), rn50::input::mean_kib(jpegs), size, size, g.batch_size);
  std::printf("%s\n", g.routes.c_str());
  std::printf("train (RandomResizedCrop + flip), GPU decode + augment: %8.0f img/s\n", g.train_per_s);
  std::printf("val (resize + centre crop), GPU decode + augment:       %8.0f img/s\n", g.val_per_s);
  std::printf("images by route: hardware decoder %lld, nvJPEG default backend %lld, libjpeg %lld\n",
              static_cast<long long>(g.hardware), static_cast<long long>(g.hybrid),
              static_cast<long long>(g.cpu_fallback));
  // Against 1e6 / rate us per image: little waiting means the host's work is what limits the rate.
  std::printf("decode thread: %.1f us per image working (routing %.1f, nvJPEG's hardware calls %.1f), "
              "%.1f us waiting for the device\n",
              g.host_us_per_image, g.route_us_per_image, g.hardware_us_per_image, g.wait_us_per_image);
  std::printf("per batch, from CUDA events: submit to ready %.2f ms (nvJPEG's host calls included), crop kernel "
              "%.2f ms\n", g.decode_latency_ms_per_batch, g.crop_ms_per_batch);
  if (g.step_ms > 0) {  // measured only with --step-ms
    const double decode_ms = 1e3 * g.batch_size / g.train_per_s;  // a train batch alone, from above
    auto verdict = [&](double ms) {
      return ms - g.step_ms < 0.5 * decode_ms ? "overlaps the step" : "does not overlap the step";
    };
    std::printf("with a simulated step of %.2f ms (decode alone %.2f ms per batch), per batch:\n", g.step_ms,
                decode_ms);
    std::printf("  each decode queued right after the step before its use:   %.2f ms: decoding %s\n",
                g.step_then_decode_ms, verdict(g.step_then_decode_ms));
    std::printf("  each decode submitted %d batches ahead (training's default): %.2f ms: decoding %s\n",
                g.decode_ahead_batches, g.decode_ahead_ms, verdict(g.decode_ahead_ms));
  }
}

int bench_decode_command(int argc, char** argv) {
  cxxopts::Options options("rn50 bench-decode",
                           "Images/s of JPEG decoding + augmentation: on this CPU (per core and on all cores), or on "
                           "the GPU with --decode gpu.");
  options.add_options()("data-root", "decode files from this folder instead of generated 500x375 JPEGs",
                        cxxopts::value<std::string>())(
      "files", "number of files", cxxopts::value<int>()->default_value("64"))(
      "threads", "threads for the all-core figure (default: usable cores)", cxxopts::value<int>())(
      "seconds", "seconds per measurement", cxxopts::value<double>()->default_value("3"))(
      "size", "output side", cxxopts::value<int>()->default_value("224"))(
      "decode", "cpu (libjpeg-turbo) or gpu (nvJPEG and rn50's kernel, as decode: gpu trains)",
      cxxopts::value<std::string>()->default_value("cpu"))(
      "batch-size", "--decode gpu: images per batch", cxxopts::value<int>()->default_value("256"))(
      "step-ms", "--decode gpu: also time the train batches with a simulated step of this many ms (matrix products), "
      "queued right before each decode and with each decode queued a step ahead (0: not)",
      cxxopts::value<double>()->default_value("0"))(
      "nvjpeg-no-pipeline", "--decode gpu: the hardware decoder with NVJPEG_FLAGS_HW_DECODE_NO_PIPELINE")(
      "decode-yuv", "--decode gpu: the hardware decoder hands out YCbCr planes, converted in rn50's kernel (as the "
      "config key decode_yuv)")(
      "device", "--decode gpu: the GPU", cxxopts::value<std::string>()->default_value("cuda:0"))(
      "repeat", "--decode gpu: measure this many times, each with a new decoder, and print the spread",
      cxxopts::value<int>()->default_value("1"))(
      "pin", "CPU decoding: measure the all-thread figure again (second) with thread k pinned to the k-th usable "
      "CPU, cycling")(
      "h,help", "print this help");
  const auto parsed = options.parse(argc, argv);
  if (parsed.count("help")) {
    std::printf("%s\n", options.help().c_str());
    return 0;
  }
  const std::string decode = parsed["decode"].as<std::string>();
  if (decode != "cpu" && decode != "gpu") throw rn50::ConfigError("--decode must be cpu or gpu (got '" + decode + "')");
  const int repeat = parsed["repeat"].as<int>();
  if (repeat < 1) throw rn50::ConfigError("--repeat must be at least 1 (got " + std::to_string(repeat) + ")");
  if (repeat > 1 && decode != "gpu") throw rn50::ConfigError("--repeat is for --decode gpu");
  if (parsed.count("pin") && decode != "cpu") throw rn50::ConfigError("--pin is for CPU decoding (--decode cpu)");
  const int files = parsed["files"].as<int>();
  const auto jpegs = parsed.count("data-root") ? rn50::input::read_jpegs(parsed["data-root"].as<std::string>(), files)
                                               : rn50::input::make_benchmark_jpegs(files, 500, 375, 7);
  if (jpegs.empty()) throw rn50::DataError("no JPEG files to decode");
  const int size = parsed["size"].as<int>();
  const double seconds = parsed["seconds"].as<double>();
  if (decode == "gpu") {
    rn50::widen_cuda_hardware_queues();  // as training with decode: gpu does
    const std::string device = parsed["device"].as<std::string>();
    if (device.rfind("cuda", 0) != 0) {
      throw rn50::ConfigError("--decode gpu needs a CUDA --device (got '" + device + "')");
    }
    rn50::init_logging("", 0);
    const double step_ms = parsed["step-ms"].as<double>();
    if (step_ms < 0) throw rn50::ConfigError("--step-ms must not be negative");
    rn50::input::GpuDecoderOptions decoder;
    decoder.hardware_no_pipeline = parsed.count("nvjpeg-no-pipeline") > 0;
    decoder.planar = parsed.count("decode-yuv") > 0;
    const int batch_size = parsed["batch-size"].as<int>();
    const auto g = rn50::input::run_gpu_decode_bench(jpegs, size, batch_size, seconds, gpu_index(device), step_ms,
                                                   decoder);
    print_gpu_decode_bench(g, jpegs, size);
    if (repeat > 1) {
      // A new decoder (nvJPEG handle and states) each time: on the H200 decoders of one process differed by up to
      // 1.6x, and by 2.2x over four machines (bench/results/2026-11-30-h200-h.md).
      std::vector<double> train_rates{g.train_per_s};
      for (int r = 2; r <= repeat; ++r) {
        const auto again = rn50::input::run_gpu_decode_bench(jpegs, size, batch_size, seconds, gpu_index(device), 0,
                                                           decoder);
        std::printf("decoder %d of %d: train %8.0f img/s, val %8.0f img/s, nvJPEG's hardware calls %.1f us per image\n",
                    r, repeat, again.train_per_s, again.val_per_s, again.hardware_us_per_image);
        train_rates.push_back(again.train_per_s);
      }
      std::sort(train_rates.begin(), train_rates.end());
      std::printf("train over %d decoders: min %.0f, median %.0f, max %.0f img/s\n", repeat, train_rates.front(),
                  rn50::monitor::percentile_of_sorted(train_rates, 50), train_rates.back());
    }
    return 0;
  }
  const int threads = parsed.count("threads") ? parsed["threads"].as<int>() : rn50::usable_cores();
  const auto r = rn50::input::run_decode_bench(jpegs, size, threads, seconds, parsed.count("pin") > 0);
  std::printf("files %d, mean %.0fx%.0f, %.1f KiB; output %dx%d\n", r.files, r.mean_width, r.mean_height, r.mean_kib,
              r.output_size, r.output_size);
  std::printf("train (RandomResizedCrop, region + DCT-scaled decode), 1 core: %8.0f img/s\n", r.train_per_core);
  std::printf("val (resize + centre crop, region + DCT-scaled decode), 1 core: %6.0f img/s\n", r.val_per_core);
  std::printf("full decode, then crop and resize, 1 core:                  %8.0f img/s\n", r.full_decode_per_core);
  std::printf("train, %d threads:                                           %8.0f img/s\n", r.threads, r.train_all_threads);
  if (parsed.count("pin") && r.pinned_failures > 0)
    std::printf("train, %d threads pinned: %d of them could not be pinned; not measured\n", r.threads, r.pinned_failures);
  else if (parsed.count("pin"))
    std::printf("train, %d threads, pinned in turn to the usable CPUs:         %8.0f img/s\n", r.threads,
                r.train_all_threads_pinned);
  return 0;
}

// `rn50 launch --nproc N -- train ...`: N local ranks of one data-parallel run.
int launch_command(int argc, char** argv) {
  int split = argc;
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--") {
      split = i;
      break;
    }
  }
  cxxopts::Options options("rn50 launch", "Start N local processes of one data-parallel run: rn50 launch --nproc N -- train ...");
  rn50::parallel::LaunchOptions launch;
  options.add_options()("nproc", "processes (one per GPU)", cxxopts::value<int>())(
      "master-port", "rendezvous port on 127.0.0.1 (default: a free one)", cxxopts::value<int>()->default_value("0"))(
      "grace", "seconds the others get to stop after one fails, before SIGKILL",
      cxxopts::value<int>()->default_value(std::to_string(launch.grace_s)))("h,help", "print this help");
  const auto parsed = options.parse(split, argv);
  if (parsed.count("help")) {
    std::printf("%s\n", options.help().c_str());
    return 0;
  }
  if (!parsed.count("nproc")) throw rn50::ConfigError("launch needs --nproc N");
  launch.processes = parsed["nproc"].as<int>();
  launch.master_port = parsed["master-port"].as<int>();
  launch.grace_s = parsed["grace"].as<int>();
  char self[4096];
  const ssize_t length = ::readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (length <= 0) throw std::runtime_error("launch: cannot find this program (/proc/self/exe)");
  launch.program.assign(self, static_cast<size_t>(length));
  for (int i = split + 1; i < argc; ++i) launch.args.emplace_back(argv[i]);
  return rn50::parallel::launch_local(launch);
}

struct Command {
  const char* name;
  const char* summary;
  std::function<int(int, char**)> run;
};

const std::vector<Command>& commands() {
  static const std::vector<Command> table = {
      {"train", "train a model (rn50 train --help)", train_command},
      {"launch", "run N local processes of one data-parallel training (rn50 launch --help)", launch_command},
      {"make-sample", "write a small learnable JPEG dataset (rn50 make-sample --help)", make_sample_command},
      {"export", "write a checkpoint's weights for torchvision (rn50 export --help)", export_command},
      {"infer", "logits of a stored batch from a weights file (rn50 infer --help)", infer_command},
      {"doctor", "measure this instance and say why it would train slowly (rn50 doctor --help)", doctor_command},
      {"bench-decode", "JPEG decode + augmentation rate of this CPU or GPU (rn50 bench-decode --help)",
       bench_decode_command},
  };
  return table;
}

void usage() {
  std::printf("rn50: ResNet training on ImageNet-format data, with each GPU speed-up as a switch.\n\nusage: rn50 COMMAND [options]\n\n");
  for (const auto& c : commands()) std::printf("  %-12s %s\n", c.name, c.summary);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || std::string(argv[1]) == "-h" || std::string(argv[1]) == "--help") {
    usage();
    return argc < 2 ? 2 : 0;
  }
  const std::string name = argv[1];
  for (const auto& command : commands()) {
    if (name != command.name) continue;
    try {
      return command.run(argc - 1, argv + 1);
    } catch (const rn50::ConfigError& e) {
      std::fprintf(stderr, "rn50 %s: configuration error: %s\n", name.c_str(), e.what());
    } catch (const rn50::DataError& e) {
      std::fprintf(stderr, "rn50 %s: data error: %s\n", name.c_str(), e.what());
    } catch (const rn50::DecodeError& e) {
      std::fprintf(stderr, "rn50 %s: bad image: %s\n", name.c_str(), e.what());
    } catch (const cxxopts::exceptions::exception& e) {
      std::fprintf(stderr, "rn50 %s: %s\n", name.c_str(), e.what());
    } catch (const std::exception& e) {
      std::fprintf(stderr, "rn50 %s: error: %s\n", name.c_str(), e.what());
      return 1;
    }
    return 2;
  }
  std::fprintf(stderr, "rn50: unknown command '%s'\n", name.c_str());
  usage();
  return 2;
}
