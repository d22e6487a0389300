// commands/train.cpp: `rn50 train`: every config key as an option, the YAML file under them (or a resumed run's own),
// the launcher's rank and MIG pinning applied before CUDA starts, then the training run (trainer/trainer.h) with its
// report after every epoch and at the end, and the line a stop signal ends it with.
#include <unistd.h>
#include <cxxopts.hpp>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <system_error>

#include "commands/command.h"
#include "core/affinity.h"
#include "core/config.h"
#include "core/errors.h"
#include "core/launch_env.h"
#include "core/log.h"
#include "core/stop.h"
#include "models/model.h"
#include "monitor/mig.h"
#include "monitor/nvml.h"
#include "report/run_report.h"
#include "trainer/session.h"
#include "trainer/trainer.h"

namespace rn50::commands {
namespace {

std::string dashed(std::string name) {
  std::replace(name.begin(), name.end(), '_', '-');
  return name;
}

std::unique_ptr<monitor::NvmlApi> open_nvml_or_throw() {
  std::string why_not;
  auto nvml = monitor::open_nvml(&why_not);
  if (!nvml) throw ConfigError("config key 'mig': NVML is unavailable: " + why_not);
  return nvml;
}

// " (a|b|c)": the registered models, for the help of the key `model`.
std::string model_names() {
  std::string out;
  for (const auto& name : models::names()) out += (out.empty() ? "" : "|") + name;
  return " (" + out + ")";
}

// Must run before anything touches CUDA: CUDA_VISIBLE_DEVICES is read once, when CUDA starts.
void pin_to_mig(Config& config, int world_size) {
  monitor::check_mig_compatible(world_size);
  const std::string uuid = monitor::select_mig(*open_nvml_or_throw(), gpu_index(config.device), config.mig);
  monitor::apply_mig_choice(uuid);
  config.device = "cuda:0";  // the instance is the only device the process sees
  std::fprintf(stderr, "rn50: pinned to MIG instance %s (CUDA_VISIBLE_DEVICES=%s)\n", uuid.c_str(), uuid.c_str());
}

// One of several processes of a data-parallel run: each takes the GPU of its local rank and its share of
// the host's cores.
void adapt_to_launch(Config& config, const LaunchEnv& launch) {
  if (config.device.rfind("cuda:", 0) == 0) {
    throw ConfigError("config key 'device': " + config.device + " would put all " + std::to_string(launch.world_size) +
                      " processes on one GPU; use 'cuda' or 'auto' "
                      "(each process takes cuda:LOCAL_RANK)");
  }
  if (config.workers == -1 && launch.local_world_size > 1) {
    config.workers = automatic_workers(config, usable_cores() / launch.local_world_size);
  }
}

// The run's page (report.html), at its end and after a failure alike: it never hides the run's own error.
void write_report(const Config& config) {
  try {
    const report::RunReport r = report::write_run_report(config.out_dir);
    log_info("report: " + r.path + " (rn50 report " + config.out_dir + " writes it again)");
  } catch (const std::exception& e) {
    log_warn(std::string("report.html not written: ") + e.what());
  }
}

// The page after each epoch, so that a long run has its curves while it runs: quiet, and one warning at most (the
// page at the end says where it is, or why not).
trainer::TrainHooks report_hooks(const Config& config) {
  trainer::TrainHooks hooks;
  hooks.epoch_end = [out_dir = config.out_dir, warned = false](int64_t epoch) mutable {
    try {
      report::write_run_report(out_dir);
    } catch (const std::exception& e) {
      if (!warned) {
        log_warn(strprintf("report.html not updated after epoch %lld: %s", static_cast<long long>(epoch), e.what()));
      }
      warned = true;
    }
  };
  return hooks;
}

// Whether this run wrote to the metrics file (since `started`): an old run's file is not this run's to report.
bool metrics_written_since(const Config& config, std::filesystem::file_time_type started) {
  std::error_code ec;
  const auto written = std::filesystem::last_write_time(config.out_dir + "/metrics.jsonl", ec);
  return !ec && written >= started;
}

// The run a resume names: a run folder, or a checkpoint (inside one, usually).
struct ResumedRun {
  std::string dir;         // the folder holding the checkpoint
  std::string checkpoint;  // the checkpoint file
  std::string config;      // the run's config.yaml; empty when the folder has none
};

ResumedRun resumed_run(const std::string& resume) {
  namespace fs = std::filesystem;
  std::error_code ec;
  ResumedRun run;
  if (fs::is_directory(resume, ec)) {
    run.dir = resume;
    run.checkpoint = (fs::path(resume) / trainer::kCheckpointFile).string();
    if (!fs::exists(run.checkpoint, ec)) {
      throw ConfigError("config key 'resume': " + resume + " is a folder without " + trainer::kCheckpointFile);
    }
  } else {
    if (!fs::exists(resume, ec)) {
      throw ConfigError("config key 'resume': " + resume + " does not exist (a run folder or its checkpoint)");
    }
    run.checkpoint = resume;
    const fs::path parent = fs::path(resume).parent_path();
    run.dir = parent.empty() ? "." : parent.string();
  }
  const std::string config = (fs::path(run.dir) / "config.yaml").string();
  if (fs::is_regular_file(config, ec)) run.config = config;
  return run;
}

// The keys whose change would make a resumed run another run: its schedule, its optimizer, its data and model.
const char* const kRunDefiningKeys[] = {
    "model",         "epochs", "batch_size", "lr",        "lr_schedule", "lr_milestones", "lr_gamma",
    "warmup_epochs", "seed",   "optimizer",  "max_steps", "image_size",  "data",          "synthetic_images"};

// Refuses, in one line naming each, the run-defining keys that differ from the resumed run's own configuration.
void check_resume_keeps_the_run(const Config& config, const ResumedRun& run) {
  Config saved;
  apply_yaml_file(saved, run.config);
  std::string changed;
  for (const auto& key : config_keys()) {
    if (std::find(std::begin(kRunDefiningKeys), std::end(kRunDefiningKeys), key.name) == std::end(kRunDefiningKeys))
      continue;
    const std::string now = key.print(config), then = key.print(saved);
    if (now != then)
      changed += (changed.empty() ? "" : ", ") + ("'" + key.name + "' " + now + " (the run's " + then + ")");
  }
  if (!changed.empty()) {
    throw ConfigError("config key 'resume': " + changed + " would change the run resumed from " + run.config +
                      "; add --resume-override to change it anyway");
  }
}

// The configuration of a run: defaults, then --config (or, resuming a run without one, the run's own config.yaml, in
// its own folder), then the command line.
Config assemble_config(const cxxopts::ParseResult& parsed, const std::map<std::string, std::string>& overrides) {
  Config config;
  // Each --config file in the order given, a later one over an earlier (the last alone was once read, the others
  // dropped without a word); a key given twice within one file is refused (core/config.cpp).
  for (const auto& argument : parsed.arguments()) {
    if (argument.key() == "config") apply_yaml_file(config, argument.value());
  }
  const auto resume_option = overrides.find("resume");
  if (resume_option != overrides.end() && !resume_option->second.empty()) {
    const ResumedRun run = resumed_run(resume_option->second);
    if (!parsed.count("config") && !run.config.empty()) apply_yaml_file(config, run.config);
    // The run continues in the folder its checkpoint is in, wherever it was first written (a copied run stays
    // copied), unless the command line names another; and from the checkpoint's weights, not the file it started
    // from (init_from recorded in its config.yaml), unless the command line names one, which conflicts.
    config.out_dir = run.dir;
    config.init_from.clear();
    apply_overrides(config, overrides);
    config.resume = run.checkpoint;
    if (!run.config.empty() && !parsed.count("resume-override")) check_resume_keeps_the_run(config, run);
    return config;
  }
  apply_overrides(config, overrides);
  return config;
}

// A word as a POSIX shell reads it back: quoted unless it holds only characters no shell treats specially.
std::string shell_word(const std::string& word) {
  const bool plain = !word.empty() && word.find_first_not_of(
                                          "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                                          "0123456789_./:@%+=,-") == std::string::npos;
  if (plain) return word;
  std::string quoted = "'";
  for (const char c : word) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

// The line a stopped run ends with: where it stopped and the command that continues it (with as many processes: the
// steps per epoch depend on them).
std::string stop_line(const trainer::StopPoint& stop, const Config& config, int processes) {
  const std::string where =
      stop.epoch_step > 0 ? strprintf("in epoch %lld after %lld of its steps (global step %lld)",
                                      static_cast<long long>(stop.epoch + 1), static_cast<long long>(stop.epoch_step),
                                      static_cast<long long>(stop.global_step))
                          : strprintf("after epoch %lld (global step %lld)", static_cast<long long>(stop.epoch),
                                      static_cast<long long>(stop.global_step));
  return "stopped by " + stop::signal_name(stop.signal) + " " + where +
         (!config.checkpoint ? "; no checkpoint was written (checkpoint: off)"
          : processes > 1    ? "; resume with " + std::to_string(processes) + " processes: rn50 launch --nproc " +
                                std::to_string(processes) + " -- train --resume " + shell_word(config.out_dir) +
                                " (or your launcher's command with train --resume)"
                          : "; resume with: rn50 train --resume " + shell_word(config.out_dir));
}

// `rn50 train`: every config key is also an option (--batch-size for batch_size).
}  // namespace

int train_command(int argc, char** argv) {
  cxxopts::Options options(
      "rn50 train", "Train a registered model (the key model) on an ImageNet-format folder (or synthetic data).");
  options.add_options()("config",
                        "YAML file of config keys, applied before the options below; given more than once, the files "
                        "apply in order, each over the one before",
                        cxxopts::value<std::string>())(
      "resume-override",
      "with --resume: allow keys that change the resumed run's schedule, optimizer, data or model (epochs, batch_size, "
      "lr, seed, model, ...)")("h,help", "print this help");
  const Config defaults;
  for (const auto& key : config_keys()) {
    const std::string value = key.print(defaults);
    auto added = options.add_options("config keys (YAML name with _ for -)");
    std::string help =
        key.help + (key.name == "model" ? model_names() : "") + " [default: " + (value.empty() ? "none" : value) + "]";
    if (key.on_off) {
      added(dashed(key.name), help, cxxopts::value<std::string>()->implicit_value("on"));
    } else {
      added(dashed(key.name), help, cxxopts::value<std::string>());
    }
  }
  const auto parsed =
      parse_options(options, argc, argv, "on/off options take their value with '=', as in --pin-memory=off");
  if (parsed.count("help")) {
    std::printf("%s\n", options.help({"", "config keys (YAML name with _ for -)"}).c_str());
    std::printf(
        "On/off keys: --key alone means on; write --key=off (with '=') to turn one off.\n"
        "tf32: LibTorch's default already runs cuDNN convolutions in TF32, so 'default' and 'off' are different\n"
        "baselines; 'off' is true FP32.\n"
        "The log goes to standard error and to OUT_DIR/train.log (capture it with 2>&1 | tee); the live progress line\n"
        "to standard output where it is a terminal.\n"
        "Stopping: the first Ctrl-C or SIGTERM ends the step under way with a checkpoint at it (exit 130 or 143); a\n"
        "second stops at once. Resume with --resume OUT_DIR: the run's own config.yaml, with options on top.\n");
    return 0;
  }
  std::map<std::string, std::string> overrides;
  for (const auto& key : config_keys()) {
    if (parsed.count(dashed(key.name))) overrides[key.name] = parsed[dashed(key.name)].as<std::string>();
  }
  // A resume named in the --config file only is a checkpoint path as before (its folder's config is not read then).
  Config config = assemble_config(parsed, overrides);
  if (config.mig == "list") {
    std::printf("%s\n", monitor::describe_mig(*open_nvml_or_throw(), gpu_index(config.device)).c_str());
    return 0;
  }
  const LaunchEnv launch = read_launch_env();
  if (launch.world_size > 1) adapt_to_launch(config, launch);
  validate(config);
  // Recorded whole in config.yaml, so that a resume from the run folder finds the data from any working directory.
  if (!config.data_root.empty()) config.data_root = std::filesystem::absolute(config.data_root).lexically_normal();
  // NCCL reads its variables when the communicator is created, later in this process.
  if (!config.nvlink) setenv("NCCL_P2P_DISABLE", "1", /*overwrite=*/1);
  if (config.decode == Decode::kGpu) widen_cuda_hardware_queues();  // before CUDA starts: see launch_env.h
  const auto models = models::names();
  if (std::find(models.begin(), models.end(), config.model) == models.end()) {
    models::create(config.model, {});  // throws the ConfigError that lists the known models
  }
  if (!config.mig.empty()) pin_to_mig(config, launch.world_size);
  if (config.data == DataSource::kFolder && !config.data_root.empty()) {
    // Inside a split the run's folder would become a class folder of no images, and every later run fail.
    std::error_code ec;
    const auto out = std::filesystem::weakly_canonical(config.out_dir, ec);
    for (const char* split : {"train", "val"}) {
      std::error_code split_ec;
      const auto root = std::filesystem::weakly_canonical(std::filesystem::path(config.data_root) / split, split_ec);
      const auto mismatch = std::mismatch(root.begin(), root.end(), out.begin(), out.end());
      if (!ec && !split_ec && mismatch.first == root.end()) {
        throw ConfigError("config key 'out_dir': " + config.out_dir + " is inside data_root's " + split +
                          "/; a run's folder there would become a class of the dataset");
      }
    }
  }
  // A fresh run would replace an earlier run's checkpoints in out_dir (a second smoke run once replaced the first's
  // 91% weights without a word): refused unless asked for.
  if (config.resume.empty() && !config.overwrite) {
    for (const char* name : {trainer::kCheckpointFile, trainer::kBestCheckpointFile}) {
      const std::filesystem::path held = std::filesystem::path(config.out_dir) / name;
      std::error_code held_ec;
      if (std::filesystem::exists(std::filesystem::symlink_status(held, held_ec))) {
        throw ConfigError("config key 'out_dir': " + config.out_dir + " holds an earlier run's " + name +
                          "; continue it with --resume " + shell_word(config.out_dir) +
                          ", or pick another --out-dir, or replace it with --overwrite");
      }
    }
  }
  // out_dir must be a folder this process can write: a failure here is the user's to fix (exit 2), not later.
  std::error_code ec;
  std::filesystem::create_directories(config.out_dir, ec);
  if (ec) throw ConfigError("config key 'out_dir': cannot create " + config.out_dir + ": " + ec.message());
  if (::access(config.out_dir.c_str(), W_OK) != 0) {
    throw ConfigError("config key 'out_dir': " + config.out_dir + " is not writable");
  }
  init_logging(config.out_dir + "/train.log", launch.rank);
  // The first SIGINT or SIGTERM ends the step under way, checkpoints and reports; a second stops at once.
  stop::install_handlers(/*announce=*/launch.rank == 0);
  const bool reports = config.report && launch.rank == 0;
  const auto started = std::filesystem::file_time_type::clock::now();
  trainer::StopPoint stopped;
  try {
    stopped = trainer::train(config, launch, reports ? report_hooks(config) : trainer::TrainHooks{});
  } catch (...) {
    if (reports && metrics_written_since(config, started)) write_report(config);
    throw;
  }
  if (reports) write_report(config);
  if (stopped.signal) {
    if (launch.rank == 0) log_info(stop_line(stopped, config, launch.world_size));
    return 128 + stopped.signal;  // as a shell reports a process its signal ended: 130 for SIGINT, 143 for SIGTERM
  }
  return 0;
}

}  // namespace rn50::commands
