// trainer/session.cpp: building a training run: each part's options from the configuration, the device and its math
// switches, data parallel, the input source, the model, optimizer and step, a resumed or initial state, the
// utilisation sampler and the start-up table.
#include "trainer/session.h"

#include <ATen/ATen.h>
#include <ATen/Context.h>
#include <torch/cuda.h>
#include <torch/utils.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <system_error>
#include <utility>
#include <vector>

#include "core/build_info.h"
#include "core/config.h"
#include "core/errors.h"
#include "core/files.h"
#include "core/launch_env.h"
#include "core/log.h"
#include "core/plan_cache.h"
#include "core/plan_search.h"
#include "cuda/cuda_support.h"
#include "cuda/device_ops.h"
#include "data/image_folder.h"
#include "input/source.h"
#include "models/model.h"
#include "monitor/devices.h"
#include "monitor/nvml.h"
#include "monitor/utilisation.h"
#include "parallel/distributed.h"
#include "parallel/grad_sync.h"
#include "parallel/watchdog.h"
#include "trainer/checkpoint.h"
#include "trainer/executor.h"
#include "trainer/metrics.h"
#include "trainer/optimizer.h"
#include "trainer/options.h"
#include "trainer/run_info.h"
#include "trainer/step_timer.h"
#include "trainer/summary_csv.h"
#include "trainer/tensorboard.h"
#include "trainer/train_step.h"

namespace rn50::trainer {
namespace {

// What a newcomer's data makes of the run, said before it trains: one class leaves nothing to learn (top-1 100% from
// the first epoch), and an epoch of whole batches may leave many images unused each epoch.
void warn_of_the_data(const Config& config, const input::DatasetInfo& info, int world) {
  if (config.data != DataSource::kFolder) return;
  if (info.classes.size() == 1) {
    log_warn("the data has one class (" + info.classes.front() +
             "): every prediction is right, so the loss and top-1 say nothing about the model");
  }
  // Whole batches alone, not max_steps (a cap the user asked for).
  const int64_t global_batch = int64_t{config.batch_size} * world;
  const int64_t batches = info.train_images / global_batch, used = batches * global_batch;
  if (batches > 0 && (info.train_images - used) * 10 > info.train_images) {
    log_warn(
        strprintf("%lld of the %lld training images are left out of each epoch: an epoch is %lld whole batch%s "
                  "of %d%s (a smaller batch_size uses more of them; the order changes each epoch)",
                  static_cast<long long>(info.train_images - used), static_cast<long long>(info.train_images),
                  static_cast<long long>(batches), batches == 1 ? "" : "es", config.batch_size,
                  world > 1 ? strprintf(" on each of %d processes", world).c_str() : ""));
  }
}

// `local_rank`: a data-parallel process takes the GPU of its rank on this host.
c10::Device resolve_device(const std::string& name, int local_rank) {
  const bool cuda_available = torch::cuda::is_available();
  // Under per-task GPU binding (Slurm) a process may see only its own GPU, whatever its local rank.
  const int visible = cuda_available ? static_cast<int>(torch::cuda::device_count()) : 1;
  const std::string own_gpu = "cuda:" + std::to_string(visible > 0 ? local_rank % visible : 0);
  if (name == "auto") return cuda_available ? c10::Device(own_gpu) : c10::Device(c10::kCPU);
  if (name == "cpu") return c10::Device(c10::kCPU);
  if (!cuda_available) {
    throw ConfigError("config key 'device': " + name + " requested, but no CUDA device is available" +
                      (cuda::built_with_cuda() ? "" : " (this rn50 was built without CUDA)") +
                      "; --device cpu --precision fp32 runs a GPU recipe on the CPU");
  }
  c10::Device device(name == "cuda" ? own_gpu : name);
  if (device.index() >= static_cast<int>(torch::cuda::device_count())) {
    throw ConfigError("config key 'device': " + name + " requested, but only " +
                      std::to_string(torch::cuda::device_count()) + " CUDA device(s) are visible");
  }
  return device;
}

// What the configuration asks of the device, checked before any work.
void check_device(const Config& config, const c10::Device& device) {
  if (!device.is_cuda() && config.precision != Precision::kFp32) {
    throw ConfigError("config key 'precision': " + name_of(config.precision) +
                      " (autocast) needs a CUDA device; this run is on the CPU");
  }
}

// The math switches are process-wide in LibTorch; set them once, before the first kernel.
void apply_math_switches(const Config& config) {
  auto& ctx = at::globalContext();
  if (config.tf32 != Tf32::kDefault) {
    const bool tf32 = config.tf32 == Tf32::kOn;
    ctx.setAllowTF32CuBLAS(tf32);
    ctx.setAllowTF32CuDNN(tf32);
  }
  ctx.setBenchmarkCuDNN(config.cudnn_benchmark);
  // deterministic: cuDNN's deterministic algorithms, and fusion: conv's ordered sums, which read the same flag. cuBLAS
  // repeats its results across streams only with a fixed workspace configuration, read when its first handle is made
  // (after this; a value the user set is kept).
  ctx.setDeterministicCuDNN(config.deterministic);
  if (config.deterministic) ::setenv("CUBLAS_WORKSPACE_CONFIG", ":4096:8", 0);
}

}  // namespace

Session::Session(const Config& config, const LaunchEnv& launch, std::unique_ptr<input::InputSource> source_in)
    : loop(loop_options(config)), device(resolve_device(config.device, launch.local_rank)), config_(config) {
  check_device(config, device);
  const input::InputOptions input = input_options(config, launch);
  input::check_input_device(input.kind, device);
  apply_math_switches(config);
  // All device work, warm-up included, runs on one non-default stream: CUDA graph capture needs it.
  if (device.is_cuda()) cuda::use_side_stream(device.index());
  if (config.expandable_segments) {
    allocator_status = device.is_cuda() ? cuda::use_expandable_segments() : "expandable_segments: unused on the CPU";
  }
  if (launch.world_size > 1) {
    distributed = std::make_unique<parallel::Distributed>(launch, distributed_options(config), device);
  }
  // fusion: conv times its plans and prologues on the first step; a file keeps those choices for the next run. Not
  // under deterministic cuDNN, which takes its plans untimed.
  if (device.is_cuda() && config.fusion == Fusion::kConv && !config.deterministic) {
    const std::string path = plan_cache_path(config.plan_cache);
    if (path.empty()) {
      plan_cache_status = config.plan_cache == "off" ? "off: every choice timed"
                                                     : "off: no folder for it ($RN50_CACHE_DIR, $XDG_CACHE_HOME and "
                                                       "$HOME unset)";
    } else {
      plan_cache = std::make_unique<PlanCache>(path, models::fusion_plan_context());
      plan_cache_use = std::make_unique<UsePlanCache>(*plan_cache);
      plan_cache_status = plan_cache->note();
    }
    if (config.plan_search == PlanSearch::kExhaustive) {
      plan_search_use = std::make_unique<UsePlanSearch>(PlanSearch::kExhaustive);
      plan_cache_status += "; plans searched exhaustively (plan_search)";
    }
  }
  input::InputContext context;
  context.device = device;
  context.rank = rank();
  context.world = world();
  context.local_rank = launch.local_rank;
  context.image_dtype = compute_dtype(config.precision);
  context.channels_last = config.channels_last;
  context.image_channels = models::input_channels(config.model, config.stem_channels);
  source = source_in ? std::move(source_in) : input::create_input_source(input, context);
  build_model();
  if (primary()) {
    std::filesystem::create_directories(config.out_dir);
    remove_stale_temporaries();
  }
  // The checkpoint and the starting weights are checked before the run writes into out_dir: a refused resume once
  // left its run's config.yaml rewritten with the refused values, and a bad init_from deleted the earlier run's
  // event files.
  if (!config.resume.empty()) resume();
  if (!config.init_from.empty()) {
    log_info("init_from " + config.init_from + ": " + load_weights(config.init_from, *model, model->classifier_name()));
  }
  if (primary()) {
    const std::string yaml = to_yaml(config);
    files::write_atomically(config.out_dir + "/config.yaml", yaml.data(), yaml.size());
    std::optional<ResumePoint> resumed;
    if (!config.resume.empty()) resumed = ResumePoint{start_epoch, global_step};
    metrics = std::make_unique<MetricsLog>(config.out_dir + "/" + kMetricsFile, resumed);
    if (!metrics->repaired().empty()) log_warn(metrics->repaired());
    add_curves(resumed);
  }
  if (distributed) join_data_parallel();
  if (device.is_cuda() && primary()) start_sampler();  // only rank 0's epoch record is written
}

Session::~Session() {
  try {
    save_plan_cache();
  } catch (...) {  // logging failed: nothing left to tell
  }
}

void Session::save_plan_cache() {
  if (!plan_cache) return;
  const std::string failure = plan_cache->save();
  if (!failure.empty()) {
    log_warn(failure);
    return;
  }
  if (primary() && !plan_cache_reported_) {
    plan_cache_reported_ = true;
    log_info(strprintf("plan cache: %lld choices taken from %s, %lld timed now and saved to it",
                       static_cast<long long>(plan_cache->hits()), plan_cache->path().c_str(),
                       static_cast<long long>(plan_cache->added())));
  }
}

int Session::world() const { return distributed ? distributed->world_size() : 1; }
int Session::rank() const { return distributed ? distributed->rank() : 0; }

void Session::beat() {
  if (watchdog) watchdog->beat();
}

// A temporary left in out_dir by a run killed while it wrote a checkpoint or repaired the metrics: the file it was
// to replace is intact (files::write_atomically renames the temporary over it only when complete), so it goes.
void Session::remove_stale_temporaries() const {
  for (const char* name : {kCheckpointFile, kBestCheckpointFile, kMetricsFile, kSummaryCsvFile}) {
    const std::string path = files::temporary_path(loop.out_dir + "/" + name);
    std::error_code ec;
    if (std::filesystem::is_regular_file(path, ec) && std::filesystem::remove(path, ec)) {
      log_warn("removed " + path + ", left by an earlier run that stopped while writing it");
    }
  }
}

// The curves beside the metrics file, from the same records: TensorBoard's event file and summary.csv. A run is not
// stopped for them: one that cannot be written is a warning.
void Session::add_curves(const std::optional<ResumePoint>& resumed) {
  try {
    auto events = std::make_unique<tensorboard::EventLog>(loop.out_dir, resumed);
    if (!events->repaired().empty()) log_warn(events->repaired());
    metrics->add_sink(std::move(events));
  } catch (const std::exception& e) {
    log_warn(std::string("TensorBoard event file not written: ") + e.what());
  }
  try {
    metrics->add_sink(std::make_unique<SummaryCsv>(loop.out_dir + "/" + kSummaryCsvFile,
                                                   loop.out_dir + "/" + kMetricsFile, resumed.has_value()));
  } catch (const std::exception& e) {
    log_warn(std::string(kSummaryCsvFile) + " not written: " + e.what());
  }
}

void Session::build_model() {
  const Config& config = config_;
  const input::DatasetInfo& info = source->info();
  torch::manual_seed(static_cast<uint64_t>(config.seed));
  if (config.stem_channels != 3 && !models::takes_stem_channels(config.model) && primary()) {
    log_warn(strprintf("stem_channels: %d: only the ResNets' stem convolution is padded; %s ignores it",
                       config.stem_channels, config.model.c_str()));
  }
  if (config.batched_casts && world() > 1 && primary()) {
    log_warn("batched_casts: off: under data parallel each gradient goes to its bucket as it arrives");
  }
  if (config.wgrad_stream == WgradStream::kAuto && config.fusion == Fusion::kConv &&
      models::has_weight_gradient_stream(config.model) && !weight_gradients_beside(config) && primary()) {
    log_info("wgrad_stream: auto: the weight gradients in line, beside decode: gpu (the graph's second-stream "
             "branches hold up nvJPEG's hardware calls)");
  }
  model = models::create(config.model, model_options(config, static_cast<int64_t>(info.classes.size()), world()));
  if (primary()) warn_of_the_data(config, info, world());
  if (const int64_t fixed = model->fixed_image_size(); fixed > 0 && config.image_size != fixed) {
    throw ConfigError(strprintf("config key 'image_size': %s takes %lld px images only, not %d", config.model.c_str(),
                                static_cast<long long>(fixed), config.image_size));
  }
  if (const int64_t least = model->min_image_size(); config.image_size < least) {
    throw ConfigError(strprintf("config key 'image_size': %s takes images of %lld px or more, not %d",
                                config.model.c_str(), static_cast<long long>(least), config.image_size));
  }
  model->to(device);
  if (config.channels_last) models::to_channels_last(*model);
  optimizer = make_optimizer(*model, optimizer_options(config, *model));
  timer = device.is_cuda() ? make_cuda_step_timer() : std::make_unique<HostStepTimer>();
  StepOptions options = step_options(config);
  if (distributed && device.is_cuda() && distributed->comm().backend() != "nccl") {
    options.no_graph = "data parallel over " + distributed->comm().backend() + " (" + distributed->backend_reason() +
                       "): its all-reduce waits on the host, which a CUDA graph cannot hold";
    if (config.cuda_graph && primary()) log_warn("cuda_graph: off: " + options.no_graph);
  }
  step = std::make_unique<TrainStep>(*model, *optimizer, options, device, *timer);
  schedule = schedule_for(config, global_batch(), info.steps_per_epoch);
}

void Session::resume() {
  const Config& config = config_;
  const input::DatasetInfo& info = source->info();
  // The model and the classes from the metadata before any tensor: a class added to the dataset was once reported
  // as a classifier of the wrong shape.
  const CheckpointMeta header = read_checkpoint_meta(config.resume);
  if (header.model != config.model) {
    throw ConfigError("config key 'resume': " + config.resume + " holds a " + header.model + ", not a " + config.model);
  }
  if (header.classes != info.classes) {
    throw ConfigError("config key 'resume': the classes of " + config.resume + " differ from the dataset's: " +
                      data::class_difference(header.classes, info.classes, "the checkpoint", "the dataset"));
  }
  const CheckpointMeta meta = load_checkpoint(config.resume, *model, *optimizer, step->state());
  if (meta.seed != config.seed) {
    throw ConfigError("config key 'seed': " + std::to_string(config.seed) + " differs from the checkpoint's " +
                      std::to_string(meta.seed) + "; a resumed run must use its checkpoint's seed");
  }
  if (meta.batch_size != config.batch_size || meta.steps_per_epoch != info.steps_per_epoch) {
    // The checkpoint does not record its processes; with the same batch, they or the dataset's size differ.
    const std::string why = meta.batch_size != config.batch_size
                                ? ""
                                : " (the same batch: the number of processes, " + std::to_string(world()) +
                                      " now, or the dataset's size differs from the run's)";
    throw ConfigError(
        strprintf("config key 'batch_size': the checkpoint was trained with batch %lld and %lld steps per "
                  "epoch, this run has %d and %lld; the schedule would not continue%s",
                  static_cast<long long>(meta.batch_size), static_cast<long long>(meta.steps_per_epoch),
                  config.batch_size, static_cast<long long>(info.steps_per_epoch), why.c_str()));
  }
  start_epoch = meta.epoch;
  start_epoch_step = meta.epoch_step;
  global_step = meta.step;
  if (meta.epoch_step > 0) {
    log_info(strprintf("resumed from %s in epoch %lld at its step %lld of %lld (global step %lld)",
                       config.resume.c_str(), static_cast<long long>(meta.epoch + 1),
                       static_cast<long long>(meta.epoch_step), static_cast<long long>(meta.steps_per_epoch),
                       static_cast<long long>(meta.step)));
  } else {
    log_info(strprintf("resumed from %s after epoch %lld (step %lld)", config.resume.c_str(),
                       static_cast<long long>(meta.epoch), static_cast<long long>(meta.step)));
  }
  // A finished run resumed (a scheduler's requeue, or a user wanting more epochs) trains nothing: it says so, and
  // how to train on (exit 0: a requeued job that finished is no error).
  if (meta.epoch >= config.epochs && meta.epoch_step == 0 && primary()) {
    log_warn(
        strprintf("the run finished its %lld epochs already (epochs: %d): nothing to train; to train more, "
                  "resume with --epochs N --resume-override",
                  static_cast<long long>(meta.epoch), config.epochs));
  }
}

// Every rank runs the same configuration and model, starts from rank 0's weights, and averages its gradients over
// the ranks in buckets that overlap the backward pass.
void Session::join_data_parallel() {
  const Config& config = config_;
  Config shared = config;
  shared.device = "";  // each rank has its own GPU
  shared.workers = 0;  // and its own host's share of cores
  distributed->check_same("configuration", to_yaml(shared));
  distributed->check_same("model", parallel::describe_tensors(named_state(*model)));
  // Ranks that saw different datasets would take different numbers of steps (and hang) or overlap.
  const input::DatasetInfo& info = source->info();
  std::string dataset = strprintf("steps per epoch: %lld\n", static_cast<long long>(info.steps_per_epoch));
  if (info.train_images > 0) dataset += strprintf("train images: %lld\n", static_cast<long long>(info.train_images));
  if (info.val_images > 0) dataset += strprintf("val images: %lld\n", static_cast<long long>(info.val_images));
  for (const auto& c : info.classes) dataset += "class: " + c + "\n";
  distributed->check_same("dataset", dataset);
  std::vector<at::Tensor> state;
  for (auto& [name, t] : named_state(*model)) state.push_back(t);
  for (auto& [name, t] : optimizer->state()) state.push_back(t);
  {
    torch::NoGradGuard no_grad;
    distributed->comm().broadcast_from_rank0(state);
  }
  const auto bucket_bytes = static_cast<int64_t>(config.bucket_mb * 1024 * 1024);
  buckets = std::make_unique<parallel::GradientBuckets>(model->parameters(), distributed->comm(), bucket_bytes);
  step->set_gradient_sync(buckets.get());
  // A backstop behind the backends' own timeouts (which say more when they fire), hence the margin.
  const int timeout_s = config.dist_timeout_s + config.dist_timeout_s / 10 + 5;
  const int rank = distributed->rank(), world = distributed->world_size();
  watchdog = std::make_unique<parallel::Watchdog>(std::chrono::seconds(timeout_s), [timeout_s, rank, world] {
    log_error(
        strprintf("rank %d of %d stopped: training made no progress for %d s (dist_timeout_s plus a margin): "
                  "another rank probably died or hangs in a collective",
                  rank, world, timeout_s));
    std::_Exit(3);
  });
}

void Session::average_buffers() {
  torch::NoGradGuard no_grad;
  for (const auto& item : model->named_buffers()) {
    at::Tensor b = item.value();
    if (!at::isFloatingType(b.scalar_type())) continue;
    distributed->comm().start_mean(b)();
  }
}

void Session::close_data_parallel() {
  watchdog.reset();
  step.reset();
  buckets.reset();
  distributed->shutdown();
}

// NVML utilisation, sampled every 100 ms on its own thread; unavailable (null) where NVML is missing.
void Session::start_sampler() {
  std::string why_not;
  std::shared_ptr<monitor::NvmlApi> nvml(monitor::open_nvml(&why_not));
  if (!nvml) {
    sampler_status = "unavailable: " + why_not;
    return;
  }
  try {
    sampler = std::make_unique<monitor::UtilisationSampler>(nvml, monitor::device_uuid(device.index()));
    sampler->start();
    sampler_status = std::string("NVML every 100 ms (PCIe counters every 500 ms)") +
                     (sampler->gpm_supported() ? ", with GPM metrics" : "");
  } catch (const std::exception& e) {
    sampler_status = std::string("unavailable: ") + e.what();
  }
}

void Session::log_start() const {
  if (!primary()) return;  // other ranks log warnings only
  const Config& config = config_;
  if (config.warmup_epochs >= config.epochs && config.warmup_epochs > 0) {
    log_warn(strprintf("warmup_epochs %g is not shorter than the run's %d epochs: the rate never reaches lr's peak",
                       config.warmup_epochs, config.epochs));
  }
  std::vector<std::pair<std::string, std::string>> rows = to_rows(config);
  rows.emplace_back("(rn50)", build_summary());
  rows.emplace_back("(device)", device.is_cuda() ? monitor::describe_device(device.index()) : "cpu");
  if (device.is_cuda()) rows.emplace_back("(kernels)", cuda::describe_kernels(device.index()));
  for (auto& row : source->describe()) rows.push_back(std::move(row));
  rows.emplace_back("(optimizer)", optimizer->describe());
  if (config.cuda_graph) rows.emplace_back("(cuda graph)", step->graph_status());
  if (!allocator_status.empty()) rows.emplace_back("(allocator)", allocator_status);
  if (!plan_cache_status.empty()) rows.emplace_back("(plan cache)", plan_cache_status);
  if (config.fusion != Fusion::kOff) rows.emplace_back("(fusion)", model->describe_fusion(step->images()));
  rows.emplace_back("(utilisation)", sampler_status.empty() ? "unavailable on the CPU" : sampler_status);
  rows.emplace_back("(classes)", std::to_string(source->info().classes.size()));
  rows.emplace_back("(steps per epoch)", std::to_string(source->info().steps_per_epoch));
  rows.emplace_back("(peak lr)", std::to_string(schedule.peak_lr));
  if (distributed) {
    rows.emplace_back("(data parallel)",
                      strprintf("%d processes over %s (%s); %d gradient buckets (%.1f MB in all), all-reduced during "
                                "the backward pass; global batch %d",
                                world(), distributed->comm().backend().c_str(),
                                distributed->backend_reason().c_str(), buckets->num_buckets(),
                                static_cast<double>(buckets->bytes()) / 1e6, static_cast<int>(global_batch())));
    if (device.is_cuda()) {
      const std::string links = monitor::describe_links();
      rows.emplace_back("(gpu links)", (links.empty() ? std::string("one GPU visible") : links) +
                                           (config.nvlink ? "" : "; nvlink off: NCCL_P2P_DISABLE=1"));
    }
  }
  log_table("rn50 train", rows);
  // The machine, for the run's report: a run is not stopped for it.
  try {
    write_run_info(config.out_dir + "/" + kRunInfoFile, world(), rows);
  } catch (const std::exception& e) {
    log_warn(std::string("run.json not written: ") + e.what());
  }
}

}  // namespace rn50::trainer
