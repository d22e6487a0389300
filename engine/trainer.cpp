// engine/trainer.cpp: the epoch loop: load, step, log, validate, checkpoint.
#include "engine/trainer.h"

#include <ATen/Context.h>
#include <ATen/ATen.h>
#include <sys/resource.h>
#include <torch/cuda.h>
#include <torch/utils.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <stdexcept>
#include <vector>

#include "core/config.h"
#include "core/errors.h"
#include "core/launch_env.h"
#include "core/log.h"
#include "data/dataset.h"
#include "data/loader.h"
#include "cuda/cuda_support.h"
#include "cuda/device_ops.h"
#include "input/gpu_decode/gpu_decoder.h"
#include "monitor/nvml.h"
#include "monitor/utilisation.h"
#include "models/model.h"
#include "engine/checkpoint.h"
#include "engine/cost.h"
#include "parallel/distributed.h"
#include "engine/executor.h"
#include "parallel/grad_sync.h"
#include "input/async_upload.h"
#include "input/upload.h"
#include "engine/lr_schedule.h"
#include "engine/metrics.h"
#include "engine/sgd.h"
#include "engine/step_timer.h"
#include "engine/train_step.h"
#include "parallel/watchdog.h"

namespace rn50::engine {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

double peak_host_rss_gib() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_maxrss) / (1024.0 * 1024.0);  // ru_maxrss is in KiB
}

// On an exception out of an epoch, the GPU decoder forgets the batches it holds instead of handing them back
// later: their loader goes as the exception unwinds. Declared after the loader, so destroyed before it.
class AbandonDecodesOnError {
 public:
  explicit AbandonDecodesOnError(input::GpuJpegDecoder* decoder)
      : decoder_(decoder), exceptions_(std::uncaught_exceptions()) {}
  ~AbandonDecodesOnError() {
    if (decoder_ != nullptr && std::uncaught_exceptions() > exceptions_) decoder_->abandon();
  }
  AbandonDecodesOnError(const AbandonDecodesOnError&) = delete;
  AbandonDecodesOnError& operator=(const AbandonDecodesOnError&) = delete;

 private:
  input::GpuJpegDecoder* decoder_;
  int exceptions_;
};

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
                      (cuda::built_with_cuda() ? "" : " (this rn50 was built without CUDA)"));
  }
  c10::Device device(name == "cuda" ? own_gpu : name);
  if (device.index() >= static_cast<int>(torch::cuda::device_count())) {
    throw ConfigError("config key 'device': " + name + " requested, but only " +
                      std::to_string(torch::cuda::device_count()) + " CUDA device(s) are visible");
  }
  return device;
}

// The math switches are process-wide in LibTorch; set them once, before the first kernel.
void apply_math_switches(const Config& config) {
  auto& ctx = at::globalContext();
  if (config.tf32 != "default") {
    const bool tf32 = config.tf32 == "on";
    ctx.setAllowTF32CuBLAS(tf32);
    ctx.setAllowTF32CuDNN(tf32);
  }
  ctx.setBenchmarkCuDNN(config.cudnn_benchmark);
}

void to_channels_last(torch::nn::Module& model) {
  torch::NoGradGuard no_grad;
  for (auto& p : model.parameters()) {
    if (p.dim() == 4) p.set_data(p.contiguous(at::MemoryFormat::ChannelsLast));
  }
}

class Run {
 public:
  Run(const Config& config, const LaunchEnv& launch)
      : config_(config), device_(resolve_device(config.device, launch.local_rank)), local_rank_(launch.local_rank) {
    if (!device_.is_cuda() && config_.precision != "fp32") {
      throw ConfigError("config key 'precision': " + config_.precision + " (autocast) needs a CUDA device; this run is on the CPU");
    }
    if (config_.decode == "gpu" && config_.data == "folder") {
      if (!device_.is_cuda()) throw ConfigError("config key 'decode': gpu needs a CUDA device; this run is on the CPU");
      if (!input::built_with_nvjpeg()) {
        throw ConfigError("config key 'decode': gpu needs nvJPEG, and this rn50 was built without it (see the "
                          "\"rn50: nvJPEG\" line of the CMake configure output)");
      }
    }
    apply_math_switches(config_);
    // All device work, warm-up included, runs on one non-default stream: CUDA graph capture needs it.
    if (device_.is_cuda()) cuda::use_side_stream(device_.index());
    if (launch.world_size > 1) distributed_ = std::make_unique<parallel::Distributed>(launch, config_, device_);
    open_data();
    build_model();
    if (primary()) {
      std::filesystem::create_directories(config_.out_dir);
      metrics_ = std::make_unique<MetricsLog>(config_.out_dir + "/metrics.jsonl");
      std::ofstream(config_.out_dir + "/config.yaml") << to_yaml(config_);
    }
    if (!config_.resume.empty()) resume();
    if (!config_.init_from.empty()) {
      log_info("init_from " + config_.init_from + ": " + load_weights(config_.init_from, *model_, model_->classifier_name()));
    }
    if (distributed_) join_data_parallel();
    if (device_.is_cuda() && primary()) start_sampler();  // only rank 0's epoch record is written
    log_start();
  }

  void run() {
    for (int64_t epoch = start_epoch_; epoch < config_.epochs; ++epoch) {
      const auto t0 = Clock::now();
      EpochRecord record = train_epoch(epoch);
      if (distributed_) average_buffers();
      if (config_.validate && val_set_) validate(record);
      beat();
      if (primary()) {
        if (config_.checkpoint) save(epoch + 1);
        // What the instance is paid for: the whole epoch, validation and checkpoint included.
        std::optional<RunCost> cost;
        if (config_.price_per_hour > 0) {
          epoch_seconds_.push_back(seconds_since(t0));
          cost = run_cost(config_.price_per_hour, epoch_seconds_, config_.epochs);
          record.extra.emplace_back("cost_per_epoch", cost->per_epoch);
          record.extra.emplace_back("projected_run_cost", cost->projected_run);
        }
        metrics_->write(record);
        log_epoch(record, cost);
      }
    }
    if (distributed_) {
      watchdog_.reset();
      // Graphs that captured collectives go before the communicators they use.
      step_.reset();
      buckets_.reset();
      distributed_->shutdown();
    }
  }

 private:
  void open_data() {
    if (config_.data == "synthetic") {
      num_classes_ = 1000;
      for (int64_t c = 0; c < num_classes_; ++c) classes_.push_back("synthetic_" + std::to_string(c));
      steps_per_epoch_ = config_.synthetic_images / (static_cast<int64_t>(config_.batch_size) * world());
    } else {
      data::SampleTransform train_tf;
      train_tf.train = true;
      train_tf.image_size = config_.image_size;
      train_tf.seed = static_cast<uint64_t>(config_.seed);
      data::SampleTransform val_tf = train_tf;
      val_tf.train = false;
      val_tf.resize_size = config_.val_resize;
      train_set_ = std::make_unique<data::JpegFolderDataset>(
          data::scan_image_folder(config_.data_root + "/train"), train_tf);
      if (config_.validate) {
        val_set_ = std::make_unique<data::JpegFolderDataset>(data::scan_image_folder(config_.data_root + "/val"), val_tf);
        if (val_set_->classes() != train_set_->classes()) {
          throw DataError("the class folders of " + config_.data_root + "/val differ from those of train");
        }
      }
      classes_ = train_set_->classes();
      num_classes_ = static_cast<int64_t>(classes_.size());
      if (static_cast<int64_t>(train_set_->size()) < static_cast<int64_t>(config_.batch_size) * world()) {
        throw DataError(strprintf("%s/train has %zu images, fewer than one batch per process (batch_size %d, %d processes)",
                                  config_.data_root.c_str(), train_set_->size(), config_.batch_size, world()));
      }
      // Each rank takes 1/world of the epoch's permutation.
      steps_per_epoch_ = static_cast<int64_t>(train_set_->size()) / world() / config_.batch_size;
      const bool pinned = config_.pin_memory && device_.is_cuda();
      if (config_.decode == "gpu") {
        open_gpu_decode(pinned);
      } else {
        open_cpu_decode(pinned);
      }
    }
    if (config_.max_steps > 0) steps_per_epoch_ = std::min(steps_per_epoch_, config_.max_steps);
  }

  std::shared_ptr<HostAllocator> host_allocator(bool pinned) const {
    return pinned ? cuda::make_pinned_allocator() : std::shared_ptr<HostAllocator>(make_pageable_allocator());
  }

  // decode: cpu: the loader's threads decode into the pools; the batches cross to the device as uint8.
  void open_cpu_decode(bool pinned) {
    std::shared_ptr<HostAllocator> host = host_allocator(pinned);
    // The loader fills `prefetch` batches ahead; the uploader holds up to kCopySlots more while they copy.
    const int slots = config_.prefetch + (pinned ? kCopySlots : 1);
    train_pool_ = std::make_unique<data::BatchPool>(slots, config_.batch_size, config_.image_size, host);
    if (val_set_) val_pool_ = std::make_unique<data::BatchPool>(slots, config_.batch_size, config_.image_size, host);
    if (pinned) {
      async_upload_ = std::make_unique<input::AsyncUploader>(device_.index(), config_.batch_size, config_.image_size,
                                                           kCopySlots);
    }
  }

  // decode: gpu: the pools hold file bytes and crops; nvJPEG and one kernel make the input on the device. The
  // decoder holds up to held_batches of a pool's batches (their labels are copied from the pool).
  void open_gpu_decode(bool pinned) {
    std::shared_ptr<HostAllocator> host = host_allocator(pinned);
    const input::GpuDecoderOptions options = gpu_decoder_options();
    const int slots = config_.prefetch + input::GpuJpegDecoder::held_batches(options);
    train_pool_ = std::make_unique<data::BatchPool>(slots, config_.batch_size, config_.image_size, host,
                                                    data::BatchContent::kEncoded);
    if (val_set_) {
      val_pool_ = std::make_unique<data::BatchPool>(slots, config_.batch_size, config_.image_size, host,
                                                    data::BatchContent::kEncoded);
    }
    // The next epoch's first batches decode during this epoch's last steps, from a loader that needs a pool of its
    // own (a loader fills every slot of its pool). Not across a validation, which decodes through the same slots.
    if (config_.decode_ahead && config_.epochs > 1 && !(config_.validate && val_set_)) {
      ahead_pool_ = std::make_unique<data::BatchPool>(slots, config_.batch_size, config_.image_size, host,
                                                      data::BatchContent::kEncoded);
    }
    gpu_decoder_ =
        std::make_unique<input::GpuJpegDecoder>(device_.index(), config_.batch_size, config_.image_size, options);
  }

  input::GpuDecoderOptions gpu_decoder_options() const {
    input::GpuDecoderOptions options;
    options.planar = config_.decode_yuv;
    options.submit_ahead = config_.decode_ahead_batches;
    return options;
  }

  void build_model() {
    torch::manual_seed(static_cast<uint64_t>(config_.seed));
    models::ModelOptions options;
    options.num_classes = num_classes_;
    options.zero_init_residual = config_.zero_init_residual;
    model_ = models::create(config_.model, options);
    model_->to(device_);
    if (config_.channels_last) to_channels_last(*model_);
    sgd_ = std::make_unique<Sgd>(*model_, config_.momentum, config_.weight_decay, config_.decay_bn_and_bias);
    timer_ = device_.is_cuda() ? make_cuda_step_timer() : std::make_unique<HostStepTimer>();
    step_ = std::make_unique<TrainStep>(*model_, *sgd_, config_, device_, config_.batch_size, config_.image_size, *timer_);
    uploader_ = std::make_unique<input::InputUploader>(device_, config_.channels_last);
    if (config_.data == "synthetic") {
      synthetic_ = std::make_unique<input::SyntheticBatches>(device_, config_.batch_size, config_.image_size, num_classes_,
                                                      step_->images().scalar_type(), config_.channels_last, config_.seed);
    }
    schedule_.peak_lr = scaled_lr(config_.lr, static_cast<int64_t>(config_.batch_size) * world());
    schedule_.steps_per_epoch = steps_per_epoch_;
    schedule_.warmup_epochs = config_.warmup_epochs;
    schedule_.epochs = config_.epochs;
    schedule_.kind = config_.lr_schedule;
    schedule_.milestones = config_.lr_milestones;
    schedule_.gamma = config_.lr_gamma;
  }

  int world() const { return distributed_ ? distributed_->world_size() : 1; }
  int rank() const { return distributed_ ? distributed_->rank() : 0; }
  bool primary() const { return rank() == 0; }

  // Every rank runs the same configuration and model, starts from rank 0's weights, and averages its
  // gradients over the ranks in buckets that overlap the backward pass.
  void join_data_parallel() {
    Config shared = config_;
    shared.device = "";  // each rank has its own GPU
    shared.workers = 0;  // and its own host's share of cores
    distributed_->check_same("configuration", to_yaml(shared));
    distributed_->check_same("model", parallel::describe_tensors(named_state()));
    // Ranks that saw different datasets would take different numbers of steps (and hang) or overlap.
    std::string dataset = strprintf("steps per epoch: %lld\n", static_cast<long long>(steps_per_epoch_));
    if (train_set_) dataset += strprintf("train images: %zu\n", train_set_->size());
    if (val_set_) dataset += strprintf("val images: %zu\n", val_set_->size());
    for (const auto& c : classes_) dataset += "class: " + c + "\n";
    distributed_->check_same("dataset", dataset);
    std::vector<at::Tensor> state;
    for (auto& [name, t] : named_state()) state.push_back(t);
    for (auto& [name, t] : sgd_->momentum_buffers()) state.push_back(t);
    {
      torch::NoGradGuard no_grad;
      distributed_->comm().broadcast_from_rank0(state);
    }
    const auto bucket_bytes = static_cast<int64_t>(config_.bucket_mb * 1024 * 1024);
    buckets_ = std::make_unique<parallel::GradientBuckets>(model_->parameters(), distributed_->comm(), bucket_bytes);
    step_->set_gradient_sync(buckets_.get());
    // A backstop behind the backends' own timeouts (which say more when they fire), hence the margin.
    const int timeout_s = config_.dist_timeout_s + config_.dist_timeout_s / 10 + 5;
    const int rank = distributed_->rank(), world = distributed_->world_size();
    watchdog_ = std::make_unique<parallel::Watchdog>(std::chrono::seconds(timeout_s), [timeout_s, rank, world] {
      log_error(strprintf("rank %d of %d stopped: training made no progress for %d s (dist_timeout_s plus a margin): "
                          "another rank probably died or hangs in a collective", rank, world, timeout_s));
      std::_Exit(3);
    });
  }

  void beat() {
    if (watchdog_) watchdog_->beat();
  }

  NamedTensors named_state() const { return engine::named_state(*model_); }

  // BatchNorm statistics differ per rank (each saw its own batches): validation and checkpoints use the mean.
  void average_buffers() {
    torch::NoGradGuard no_grad;
    for (const auto& item : model_->named_buffers()) {
      at::Tensor b = item.value();
      if (!at::isFloatingType(b.scalar_type())) continue;
      distributed_->comm().start_mean(b)();
    }
  }

  void resume() {
    const CheckpointMeta meta = load_checkpoint(config_.resume, *model_, *sgd_, step_->state());
    if (meta.model != config_.model) {
      throw ConfigError("config key 'resume': " + config_.resume + " holds a " + meta.model + ", not a " + config_.model);
    }
    if (meta.classes != classes_) {
      throw ConfigError("config key 'resume': the classes of " + config_.resume + " differ from the dataset's");
    }
    if (meta.seed != config_.seed) {
      throw ConfigError("config key 'seed': " + std::to_string(config_.seed) + " differs from the checkpoint's " +
                        std::to_string(meta.seed) + "; a resumed run must use its checkpoint's seed");
    }
    if (meta.batch_size != config_.batch_size || meta.steps_per_epoch != steps_per_epoch_) {
      throw ConfigError(strprintf("config key 'batch_size': the checkpoint was trained with batch %lld and %lld steps per "
                                  "epoch, this run has %d and %lld; the schedule would not continue",
                                  static_cast<long long>(meta.batch_size), static_cast<long long>(meta.steps_per_epoch),
                                  config_.batch_size, static_cast<long long>(steps_per_epoch_)));
    }
    start_epoch_ = meta.epoch;
    global_step_ = meta.step;
    log_info(strprintf("resumed from %s after epoch %lld (step %lld)", config_.resume.c_str(),
                       static_cast<long long>(meta.epoch), static_cast<long long>(meta.step)));
  }

  // NVML utilisation, sampled every 100 ms on its own thread; unavailable (null) where NVML is missing.
  void start_sampler() {
    std::string why_not;
    std::shared_ptr<monitor::NvmlApi> nvml(monitor::open_nvml(&why_not));
    if (!nvml) {
      sampler_status_ = "unavailable: " + why_not;
      return;
    }
    try {
      sampler_ = std::make_unique<monitor::UtilisationSampler>(nvml, cuda::device_uuid(device_.index()));
      sampler_->start();
      sampler_status_ = std::string("NVML every 100 ms (PCIe counters every 500 ms)") +
                        (sampler_->gpm_supported() ? ", with GPM metrics" : "");
    } catch (const std::exception& e) {
      sampler_status_ = std::string("unavailable: ") + e.what();
    }
  }

  void log_start() {
    if (!primary()) return;  // other ranks log warnings only
    std::vector<std::pair<std::string, std::string>> rows = to_rows(config_);
    rows.emplace_back("(device)", device_.is_cuda() ? cuda::describe_device(device_.index()) : "cpu");
    if (device_.is_cuda()) rows.emplace_back("(kernels)", cuda::describe_kernels(device_.index()));
    if (gpu_decoder_) {
      rows.emplace_back("(decode)", gpu_decoder_->describe());
      const char* queues = std::getenv("CUDA_DEVICE_MAX_CONNECTIONS");
      rows.emplace_back("(cuda hardware queues)", queues ? queues : "CUDA's default (8)");
    } else {
      rows.emplace_back("(input copy)", async_upload_ ? "pinned, asynchronous on a copy stream" : "blocking copy");
    }
    if (config_.cuda_graph) rows.emplace_back("(cuda graph)", step_->graph_status());
    rows.emplace_back("(utilisation)", sampler_status_.empty() ? "unavailable on the CPU" : sampler_status_);
    rows.emplace_back("(classes)", std::to_string(num_classes_));
    rows.emplace_back("(train images)", train_set_ ? std::to_string(train_set_->size()) : "synthetic");
    rows.emplace_back("(steps per epoch)", std::to_string(steps_per_epoch_));
    rows.emplace_back("(peak lr)", std::to_string(schedule_.peak_lr));
    if (distributed_) {
      rows.emplace_back("(data parallel)",
                        strprintf("%d processes over %s; %d gradient buckets (%.1f MB in all), all-reduced during the "
                                  "backward pass; global batch %d",
                                  world(), distributed_->comm().backend().c_str(), buckets_->num_buckets(),
                                  static_cast<double>(buckets_->bytes()) / 1e6, config_.batch_size * world()));
      if (device_.is_cuda()) {
        const std::string links = cuda::describe_links();
        rows.emplace_back("(gpu links)", (links.empty() ? std::string("one GPU visible") : links) +
                                             (config_.nvlink ? "" : "; nvlink off: NCCL_P2P_DISABLE=1"));
      }
    }
    log_table("rn50 train", rows);
  }

  data::LoaderOptions loader_options(bool train) const {
    data::LoaderOptions options;
    options.batch_size = config_.batch_size;
    options.workers = config_.workers;
    // Ranks on one host take consecutive blocks of CPUs (each rank's workers are its share of the cores).
    options.pin_first_cpu = config_.pin_workers ? std::max(0, local_rank_ * config_.workers) : -1;
    options.drop_last = train;
    options.strict = config_.strict_data;
    return options;
  }

  static void report_bad_sample(const std::string& what, const std::string& reason) {
    log_warn("bad sample skipped: " + what + ": " + reason);
  }

  // A sample of `dataset` the GPU could not decode although its header was fine: counted and replaced like the
  // loader's bad samples, or the end of the run under strict_data.
  input::BadDecodeHandler bad_gpu_decode_handler(const data::ImageDataset& dataset) const {
    return [this, &dataset](size_t index, const std::string& reason) {
      if (config_.strict_data) throw DecodeError("bad sample (strict mode): " + dataset.describe(index) + ": " + reason);
      report_bad_sample(dataset.describe(index), reason);
    };
  }

  // Hands a host batch back to `loader` once the device no longer reads it.
  static input::ReleaseBatch release_to(data::BatchLoader& loader) {
    return [&loader](const data::HostBatch& b) { loader.release(b); };
  }

  // Host batch -> normalised device images and labels in `images` / `labels` (which may be the step's
  // static inputs). The host buffer goes back to the loader once its copy (or decode) is complete.
  void load_input(const data::HostBatch& batch, data::BatchLoader& loader, const data::ImageDataset& dataset,
                  at::Tensor& images, at::Tensor& labels) {
    if (gpu_decoder_) {
      gpu_decoder_->decode_into(batch, images, labels, bad_gpu_decode_handler(dataset), release_to(loader));
      return;
    }
    if (async_upload_) {
      const auto [u8, y] = async_upload_->upload(batch, [&loader](const data::HostBatch& b) { loader.release(b); });
      uploader_->normalize_into(u8, images);
      labels.copy_(y);
      return;
    }
    const auto [u8, y] = uploader_->upload(batch, config_.image_size);
    loader.release(batch);
    uploader_->normalize_into(u8, images);
    labels.copy_(y);
  }

  // decode: gpu in training: the next batch from the loader, handed to the decoder (finish_into makes it later).
  void submit_gpu_decode(data::BatchLoader& loader, EpochRecord& record) {
    const auto wait_start = Clock::now();
    const std::optional<data::HostBatch> batch = loader.next();
    record.data_wait_s += seconds_since(wait_start);
    if (!batch) throw std::logic_error("decode: gpu: the loader ran out of batches before the epoch's last step");
    try {
      gpu_decoder_->submit(*batch, bad_gpu_decode_handler(*train_set_), release_to(loader));
    } catch (...) {
      loader.release(*batch);  // not the decoder's: back to the loader, or the epoch would skip it
      throw;
    }
  }

  std::unique_ptr<data::BatchLoader> make_train_loader(int64_t epoch, data::BatchPool& pool) {
    auto loader = std::make_unique<data::BatchLoader>(
        *train_set_, data::epoch_order(train_set_->size(), config_.seed, epoch, /*shuffle=*/true, rank(), world()), epoch,
        loader_options(true), pool, report_bad_sample);
    if (config_.pin_workers && loader->pinned_workers() < loader->worker_threads() && !unpinned_workers_logged_) {
      unpinned_workers_logged_ = true;
      log_warn(strprintf("pin_workers: %d of %d decode threads could not be pinned; they run unpinned",
                         loader->worker_threads() - loader->pinned_workers(), loader->worker_threads()));
    }
    return loader;
  }

  // One of the next epoch's first batches, during one of this epoch's last steps; the first makes its loader. A
  // read error (a bad file under strict_data) must not cost this epoch its record and checkpoint: it stops the
  // submits ahead, and the next epoch reads on from its loader at its start and meets the error there (a decode
  // error comes out of that epoch's finish_into).
  void submit_next_epochs_batch(int64_t next_epoch, EpochRecord& record) {
    if (next_epoch_ahead_failed_ ||
        next_epoch_submitted_ >= std::min<int64_t>(config_.decode_ahead_batches, steps_per_epoch_))
      return;
    try {
      if (!next_epoch_loader_) next_epoch_loader_ = make_train_loader(next_epoch, *ahead_pool_);
      submit_gpu_decode(*next_epoch_loader_, record);
      ++next_epoch_submitted_;
    } catch (const std::exception& e) {
      next_epoch_ahead_failed_ = true;
      if (next_epoch_submitted_ == 0) next_epoch_loader_.reset();  // the decoder holds nothing of it
      log_warn(std::string("the next epoch's first batches, decoded ahead, stopped (read again at its start): ") +
               first_line(e.what()));
    }
  }

  EpochRecord train_epoch(int64_t epoch) {
    if (device_.is_cuda()) cuda::reset_peak_memory(device_.index());
    std::unique_ptr<data::BatchLoader> loader;
    // Made during the previous epoch's last steps, its first batches submitted then: its pool becomes the train pool.
    int64_t submitted = 0;  // decode: gpu ahead: this epoch's batches handed to the decoder so far
    if (next_epoch_loader_) {
      loader = std::move(next_epoch_loader_);
      submitted = next_epoch_submitted_;
      std::swap(train_pool_, ahead_pool_);
    }
    next_epoch_submitted_ = 0;
    next_epoch_ahead_failed_ = false;
    if (!loader && train_set_) loader = make_train_loader(epoch, *train_pool_);
    const AbandonDecodesOnError abandon_on_error(gpu_decoder_.get());
    EpochRecord record;
    record.epoch = epoch + 1;
    at::Tensor loss_sum = at::zeros({}, at::TensorOptions(device_).dtype(at::kFloat));
    at::Tensor interval_loss = at::zeros_like(loss_sum);
    timer_->take_totals();
    if (async_upload_) async_upload_->take_copy_seconds();
    // No reset of the GPU decoder's counts here: the decode thread may have decoded one of this epoch's first
    // batches since the last record (validation takes its own counts).
    if (sampler_) sampler_->take_epoch_summary();  // drop what was sampled outside training
    const auto t0 = Clock::now();
    auto interval_start = t0;
    int64_t interval_steps = 0;
    const bool gpu_decode_ahead = loader && gpu_decoder_ && config_.decode_ahead;
    for (int64_t s = 0; s < steps_per_epoch_; ++s) {
      timer_->begin_step();
      if (gpu_decode_ahead) {
        // An epoch's start: its first N batches (fewer when the last epoch's steps submitted some).
        for (; submitted < steps_per_epoch_ && submitted < s + config_.decode_ahead_batches; ++submitted)
          submit_gpu_decode(*loader, record);
        gpu_decoder_->finish_into(step_->images(), step_->labels());  // batch s, submitted during step s-N
      } else if (loader) {
        const auto wait_start = Clock::now();
        const std::optional<data::HostBatch> batch = loader->next();
        record.data_wait_s += seconds_since(wait_start);
        load_input(*batch, *loader, *train_set_, step_->images(), step_->labels());
      } else {
        const auto& [images, labels] = synthetic_->next();
        step_->images().copy_(images);
        step_->labels().copy_(labels);
      }
      timer_->mark(Phase::kInput);
      const double lr = schedule_.at(global_step_);
      const at::Tensor& loss = step_->run(lr);
      // Batch s+N (N = decode_ahead_batches), N steps ahead of its use, handed to the decode thread after step s is
      // queued: while one of nvJPEG's slow calls waits for the device to run the steps queued before it, batches
      // s+1 .. s+N-1 are decoded already and step s+1 goes in (bench/results/2026-11-30-h200-g.md).
      if (gpu_decode_ahead && submitted < steps_per_epoch_) {
        submit_gpu_decode(*loader, record);
        ++submitted;
      } else if (gpu_decode_ahead && ahead_pool_ && epoch + 1 < config_.epochs) {
        // Else the next epoch would start with the device idle for a whole decode (8-20 ms in each 2.2 s epoch of
        // 50 steps on the H200: bench/results/2026-11-30-h200-e.md). Their loader waits count in this epoch's
        // record, their routes in that of the epoch during which the decode thread decodes them.
        submit_next_epochs_batch(epoch + 1, record);
      }
      beat();
      loss_sum.add_(loss);
      interval_loss.add_(loss);
      ++interval_steps;
      ++global_step_;
      record.lr = lr;
      if (primary() && global_step_ % config_.log_every == 0) {
        // The only sync in the loop, every log_every steps, on the rank that logs. An interval can be shorter than log_every
        // at the start of an epoch, since records follow the global step.
        const double mean_loss = interval_loss.item<double>() / interval_steps;
        const double rate =
            static_cast<double>(interval_steps * config_.batch_size * world()) / seconds_since(interval_start);
        if (metrics_) metrics_->write(StepRecord{epoch + 1, global_step_, mean_loss, lr, rate});
        log_info(strprintf("epoch %lld step %lld loss %.4f lr %.5f %.0f img/s", static_cast<long long>(epoch + 1),
                           static_cast<long long>(global_step_), mean_loss, lr, rate));
        interval_loss.zero_();
        interval_steps = 0;
        interval_start = Clock::now();
      }
    }
    if (async_upload_) async_upload_->drain();
    if (gpu_decoder_) gpu_decoder_->drain();  // the loader, which owns the batches it holds, goes next (up to N
                                              // batches of the next epoch's loader stay submitted)
    if (distributed_) {
      distributed_->comm().sum(loss_sum);
      loss_sum.div_(world());
    }
    record.train_loss = loss_sum.item<double>() / static_cast<double>(steps_per_epoch_);
    record.wall_s = seconds_since(t0);
    record.steps = steps_per_epoch_;
    record.images = steps_per_epoch_ * config_.batch_size * world();  // all ranks together
    record.images_per_s = static_cast<double>(record.images) / record.wall_s;
    record.compute_s = record.wall_s - record.data_wait_s;
    record.bad_samples = loader ? loader->bad_samples() : 0;
    add_gpu_decode_counts(record);
    if (distributed_) {
      const std::vector<double> waits = distributed_->all_values("data_wait", record.data_wait_s);
      for (int r = 0; r < world(); ++r) record.extra.emplace_back(strprintf("data_wait_s_rank%d", r), waits[r]);
      const std::vector<double> bad = distributed_->all_values("bad_samples", static_cast<double>(record.bad_samples));
      record.bad_samples = 0;
      for (const double b : bad) record.bad_samples += static_cast<int64_t>(b);
    }
    record.peak_gpu_mem_gib = device_.is_cuda() ? cuda::peak_memory_gib(device_.index()) : std::nullopt;
    record.peak_host_rss_gib = peak_host_rss_gib();
    const auto phases = timer_->take_totals();
    for (int p = 0; p < kNumPhases; ++p) {
      // No communication on one process: unavailable, not 0. Under a CUDA graph the all-reduces are inside
      // the replayed forward+backward and not timed apart.
      const bool measured = static_cast<Phase>(p) != Phase::kCommunication || (distributed_ && !step_->graphed());
      record.extra.emplace_back(kPhaseNames[p], measured ? std::optional<double>(phases.total[p]) : std::nullopt);
    }
    // The slowest step's input phase: near input_s, one stall (an epoch's first step, say); far below, a steady cost.
    record.extra.emplace_back("input_slowest_step_s", phases.slowest[static_cast<int>(Phase::kInput)]);
    // Likewise for the gaps between steps: the host late to queue a step, every step or once.
    record.extra.emplace_back("between_steps_slowest_s", phases.slowest[static_cast<int>(Phase::kBetweenSteps)]);
    record.extra.emplace_back("h2d_copy_s", async_upload_ ? std::optional<double>(async_upload_->take_copy_seconds())
                                                          : std::nullopt);
    record.extra.emplace_back("cuda_graph", step_->graphed() ? 1.0 : 0.0);
    for (auto& item : sampler_ ? sampler_->take_epoch_summary() : monitor::UtilisationSampler::unavailable_summary()) {
      record.extra.push_back(std::move(item));
    }
    record.extra.emplace_back("peak_gpu_reserved_gib",
                              device_.is_cuda() ? cuda::peak_reserved_gib(device_.index()) : std::nullopt);
    return record;
  }

  void validate(EpochRecord& record) {
    // Each rank evaluates every world-th image, all of them together the whole split once.
    std::vector<size_t> order;
    for (size_t i = static_cast<size_t>(rank()); i < val_set_->size(); i += static_cast<size_t>(world())) order.push_back(i);
    data::BatchLoader loader(*val_set_, std::move(order), 0, loader_options(false), *val_pool_, report_bad_sample);
    const AbandonDecodesOnError abandon_on_error(gpu_decoder_.get());
    at::Tensor loss = at::zeros({}, at::TensorOptions(device_).dtype(at::kFloat));
    at::Tensor top1 = at::zeros_like(loss), top5 = at::zeros_like(loss);
    int64_t images = 0;
    while (const std::optional<data::HostBatch> batch = loader.next()) {
      at::Tensor x = at::empty({batch->size, 3, config_.image_size, config_.image_size},
                               at::TensorOptions(device_).dtype(step_->images().scalar_type()),
                               config_.channels_last ? at::MemoryFormat::ChannelsLast : at::MemoryFormat::Contiguous);
      at::Tensor y = at::empty({batch->size}, at::TensorOptions(device_).dtype(at::kLong));
      load_input(*batch, loader, *val_set_, x, y);
      const EvalSums sums = step_->executor().evaluate(x, y);
      beat();
      loss.add_(sums.loss);
      top1.add_(sums.top1);
      top5.add_(sums.top5);
      images += batch->size;
    }
    if (async_upload_) async_upload_->drain();
    if (gpu_decoder_) gpu_decoder_->drain();
    int64_t bad = loader.bad_samples() + (gpu_decoder_ ? gpu_decoder_->take_counts().bad : 0);
    if (distributed_) {
      at::Tensor sums = at::stack({loss, top1, top5, at::full({}, static_cast<double>(images), loss.options()),
                                   at::full({}, static_cast<double>(bad), loss.options())});
      distributed_->comm().sum(sums);
      const auto host = sums.to(at::kCPU);
      loss = host[0], top1 = host[1], top5 = host[2];
      images = static_cast<int64_t>(host[3].item<double>());
      bad = static_cast<int64_t>(host[4].item<double>());
    }
    record.val_loss = loss.item<double>() / images;
    record.top1 = top1.item<double>() / images;
    record.top5 = top5.item<double>() / images;
    record.bad_samples += bad;
  }

  // The epoch's images per GPU decode route (null with decode: cpu); what nothing decoded joins bad_samples.
  void add_gpu_decode_counts(EpochRecord& record) {
    std::optional<input::GpuDecodeCounts> counts;
    if (gpu_decoder_) counts = gpu_decoder_->take_counts();
    auto value = [&](auto input::GpuDecodeCounts::*member) {
      return counts ? std::optional<double>(static_cast<double>((*counts).*member)) : std::nullopt;
    };
    record.extra.emplace_back("gpu_decode_hardware", value(&input::GpuDecodeCounts::hardware));
    record.extra.emplace_back("gpu_decode_hybrid", value(&input::GpuDecodeCounts::hybrid));
    record.extra.emplace_back("gpu_decode_cpu_fallback", value(&input::GpuDecodeCounts::cpu_fallback));
    // The decoder's host work (mostly on its own thread) and the decode thread's waits for the device; the
    // training thread's waits in finish_into for a batch's decode and for the device (kept two steps behind).
    record.extra.emplace_back("gpu_decode_host_s", value(&input::GpuDecodeCounts::host_s));
    record.extra.emplace_back("gpu_decode_wait_s", value(&input::GpuDecodeCounts::wait_s));
    record.extra.emplace_back("gpu_decode_batch_wait_s", value(&input::GpuDecodeCounts::batch_wait_s));
    record.extra.emplace_back("gpu_decode_pace_wait_s", value(&input::GpuDecodeCounts::pace_wait_s));
    // Parts of host_s: choosing routes (nvJPEG parses each header), and nvJPEG's batched hardware calls.
    record.extra.emplace_back("gpu_decode_route_s", value(&input::GpuDecodeCounts::route_s));
    record.extra.emplace_back("gpu_decode_hardware_call_s", value(&input::GpuDecodeCounts::hardware_call_s));
    record.extra.emplace_back("gpu_decode_slowest_hardware_call_s",
                              value(&input::GpuDecodeCounts::slowest_hardware_call_s));
    // From CUDA events: each batch from submit to ready (nvJPEG's host calls included), the compute stream waiting
    // for a decode before making the input, and the crop kernel.
    record.extra.emplace_back("gpu_decode_latency_s", value(&input::GpuDecodeCounts::decode_latency_s));
    record.extra.emplace_back("gpu_decode_stall_s", value(&input::GpuDecodeCounts::input_stall_s));
    record.extra.emplace_back("gpu_decode_crop_s", value(&input::GpuDecodeCounts::crop_s));
    record.extra.emplace_back("gpu_decode_new_buffers", value(&input::GpuDecodeCounts::new_buffers));
    if (!counts) return;
    record.bad_samples += counts->bad;
    if (counts->hybrid + counts->cpu_fallback + counts->bad > 0) {
      log_info(strprintf("gpu decode: %lld images on the hardware decoder, %lld on nvJPEG's default backend, %lld by "
                         "libjpeg, %lld undecodable", static_cast<long long>(counts->hardware),
                         static_cast<long long>(counts->hybrid), static_cast<long long>(counts->cpu_fallback),
                         static_cast<long long>(counts->bad)));
    }
  }

  void save(int64_t epochs_done) {
    CheckpointMeta meta{config_.model, epochs_done, global_step_, config_.seed, classes_, config_.batch_size,
                        steps_per_epoch_};
    save_checkpoint(config_.out_dir + "/checkpoint.safetensors", *model_, *sgd_, meta, step_->state());
  }

  void log_epoch(const EpochRecord& r, const std::optional<RunCost>& cost) {
    auto pct = [](const std::optional<double>& x) { return x ? strprintf("%.2f%%", 100.0 * *x) : std::string("-"); };
    log_info(strprintf(
        "epoch %lld/%d: %.1f s, %.0f img/s (data wait %.1f s), train loss %.4f, val loss %s, top-1 %s, top-5 %s, "
        "bad samples %lld%s",
        static_cast<long long>(r.epoch), config_.epochs, r.wall_s, r.images_per_s, r.data_wait_s, r.train_loss,
        r.val_loss ? strprintf("%.4f", *r.val_loss).c_str() : "-", pct(r.top1).c_str(), pct(r.top5).c_str(),
        static_cast<long long>(r.bad_samples),
        cost ? strprintf(", cost %.4g this epoch, projected run cost %.4g", cost->per_epoch, cost->projected_run).c_str()
             : ""));
  }

  const Config& config_;
  c10::Device device_;
  const int local_rank_;              // this process's rank on its host: its block of CPUs under pin_workers
  bool unpinned_workers_logged_ = false;
  std::unique_ptr<parallel::Distributed> distributed_;  // declared first: destroyed after everything that uses it
  std::unique_ptr<data::JpegFolderDataset> train_set_, val_set_;
  std::unique_ptr<data::BatchPool> train_pool_, val_pool_;
  std::unique_ptr<data::BatchPool> ahead_pool_;  // decode: gpu: the next epoch's loader fills it (null: no such loader)
  std::unique_ptr<data::BatchLoader> next_epoch_loader_;  // made in an epoch's last steps; after the pools it uses
  int64_t next_epoch_submitted_ = 0;     // its batches handed to the decoder
  bool next_epoch_ahead_failed_ = false;  // a submit ahead failed: no more this epoch
  std::vector<std::string> classes_;
  int64_t num_classes_ = 0;
  int64_t steps_per_epoch_ = 0;
  std::shared_ptr<models::Classifier> model_;
  std::unique_ptr<Sgd> sgd_;
  static constexpr int kCopySlots = 2;
  std::unique_ptr<StepTimer> timer_;
  std::unique_ptr<TrainStep> step_;
  std::unique_ptr<input::InputUploader> uploader_;
  std::unique_ptr<input::AsyncUploader> async_upload_;
  std::unique_ptr<input::GpuJpegDecoder> gpu_decoder_;
  std::unique_ptr<input::SyntheticBatches> synthetic_;
  std::unique_ptr<MetricsLog> metrics_;
  std::unique_ptr<monitor::UtilisationSampler> sampler_;
  std::unique_ptr<parallel::GradientBuckets> buckets_;
  std::unique_ptr<parallel::Watchdog> watchdog_;  // data parallel: ends a rank whose loop is stuck
  std::string sampler_status_;
  LrSchedule schedule_;
  int64_t start_epoch_ = 0;
  int64_t global_step_ = 0;
  std::vector<double> epoch_seconds_;  // whole epochs of this process, for the cost projection
};

}  // namespace

void train(const Config& config, const LaunchEnv& launch) {
  Run run(config, launch);
  if (launch.world_size <= 1) {
    run.run();
    return;
  }
  try {
    run.run();
  } catch (const ConfigError&) {
    throw;
  } catch (const DataError&) {
    throw;
  } catch (const std::exception& e) {
    // A failed collective's message (Gloo, NCCL) does not say why it failed; the usual reason is another rank.
    throw std::runtime_error(strprintf("rank %d of %d stopped: %s (in a data-parallel run this usually means another "
                                       "rank died or hangs; waits are bounded by dist_timeout_s=%d)",
                                       launch.rank, launch.world_size, first_line(e.what()).c_str(),
                                       config.dist_timeout_s));
  }
}

}  // namespace rn50::engine
