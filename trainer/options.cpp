// trainer/options.cpp: each part's options from the configuration.
#include "trainer/options.h"

#include "core/config.h"
#include "core/launch_env.h"
#include "core/log.h"
#include "data/decode_budget.h"

namespace rn50::trainer {

at::ScalarType compute_dtype(Precision precision) {
  switch (precision) {
    case Precision::kFp16:
      return at::kHalf;
    case Precision::kBf16:
      return at::kBFloat16;
    case Precision::kFp32:
      break;
  }
  return at::kFloat;
}

input::InputOptions input_options(const Config& c, const LaunchEnv& launch) {
  input::InputOptions o;
  o.kind = c.data == DataSource::kSynthetic ? input::SourceKind::kSynthetic
           : c.decode == Decode::kGpu       ? input::SourceKind::kGpuDecode
                                            : input::SourceKind::kCpuDecode;
  o.data_root = c.data_root;
  o.batch_size = c.batch_size;
  o.image_size = c.image_size;
  o.val_resize = c.val_resize;
  o.epochs = c.epochs;
  o.max_steps = c.max_steps;
  o.seed = c.seed;
  o.validate = c.validate;
  o.workers = c.workers;
  o.prefetch = c.prefetch;
  o.pin_memory = c.pin_memory;
  o.pin_workers = c.pin_workers;
  o.strict_data = c.strict_data;
  o.limits.max_bytes = c.max_image_bytes;
  o.limits.max_pixels = c.max_image_pixels;
  const data::ProcessMemory memory = data::process_memory();
  const int processes = local_processes(launch);
  o.decode_budget_bytes =
      data::decode_budget_bytes(static_cast<uint64_t>(c.decode_memory_mb) << 20, memory.bytes, processes);
  o.decode_budget_origin =
      c.decode_memory_mb > 0 ? "decode_memory_mb"
                             : std::string("a quarter of ") +
                                   (memory.bytes == 0 ? "16 GiB, the memory unknown"
                                    : memory.cgroup   ? "the cgroup memory limit"
                                                      : "the machine's memory") +
                                   (processes > 1 ? strprintf(", shared by %d processes on this host", processes) : "");
  o.decode_yuv = c.decode_yuv;
  o.decode_ahead = c.decode_ahead;
  o.decode_ahead_batches = c.decode_ahead_batches;
  o.gpu_decoders = c.gpu_decoders;
  using Share = data::CpuDecodeShare::Mode;
  o.decode_cpu_share.mode = c.decode_cpu_share.automatic        ? Share::kAuto
                            : c.decode_cpu_share.fraction > 0.0 ? Share::kFixed
                                                                : Share::kOff;
  o.decode_cpu_share.fraction = c.decode_cpu_share.fraction;
  o.synthetic_images = c.synthetic_images;
  return o;
}

bool weight_gradients_beside(const Config& c) {
  if (c.wgrad_stream != WgradStream::kAuto) return c.wgrad_stream == WgradStream::kOn;
  return !(c.data == DataSource::kFolder && c.decode == Decode::kGpu);
}

models::ModelOptions model_options(const Config& c, int64_t num_classes, int world) {
  models::ModelOptions o;
  o.num_classes = num_classes;
  o.zero_init_residual = c.zero_init_residual;
  o.fusion = c.fusion == Fusion::kConv        ? models::Fusion::kConv
             : c.fusion == Fusion::kBatchNorm ? models::Fusion::kBatchNorm
                                              : models::Fusion::kOff;
  o.bn_kernels = c.fusion_kernels == FusionKernels::kRn50 ? ops::BnKernels::kOwn : ops::BnKernels::kAuto;
  o.wgrad_stream = weight_gradients_beside(c);
  o.stem_channels = c.stem_channels;
  // Data parallel's buckets start their all-reduces as gradients arrive; batched casts deliver them all at the end.
  o.batched_casts = c.batched_casts && world == 1;
  o.fuse_stem_pool = c.fuse_stem_pool;
  o.conv_prologue = c.conv_prologue == ConvPrologue::kFused      ? ops::PrologueRun::kFused
                    : c.conv_prologue == ConvPrologue::kSeparate ? ops::PrologueRun::kSeparate
                                                                 : ops::PrologueRun::kTimed;
  o.stochastic_depth = c.stochastic_depth;
  o.dropout = c.dropout;
  return o;
}

StepOptions step_options(const Config& c) {
  StepOptions o;
  o.batch_size = c.batch_size;
  o.image_size = c.image_size;
  o.input_dtype = compute_dtype(c.precision);
  o.channels_last = c.channels_last;
  o.image_channels = models::input_channels(c.model, c.stem_channels);
  o.loss_scaling = c.precision == Precision::kFp16;
  o.cuda_graph = c.cuda_graph;
  o.clip_grad_norm = c.clip_grad_norm;
  o.mixup.mixup_alpha = c.mixup_alpha;
  o.mixup.cutmix_alpha = c.cutmix_alpha;
  o.mixup.prob = c.mixup_prob;
  o.mixup.switch_prob = c.mixup_switch_prob;
  if (c.precision != Precision::kFp32) o.executor.autocast = compute_dtype(c.precision);
  o.executor.label_smoothing = c.label_smoothing;
  return o;
}

OptimizerOptions optimizer_options(const Config& c, const models::Classifier& model) {
  OptimizerOptions o;
  o.kind = c.optimizer == OptimizerKind::kAdamW ? OptimizerOptions::Kind::kAdamW : OptimizerOptions::Kind::kSgd;
  o.weight_decay = c.weight_decay;
  o.decay_norms_and_biases = c.decay_bn_and_bias;
  if (!c.decay_bn_and_bias) o.no_decay = model.no_weight_decay();
  o.momentum = c.momentum;
  o.beta1 = c.adamw_beta1;
  o.beta2 = c.adamw_beta2;
  o.eps = c.adamw_eps;
  return o;
}

LoopOptions loop_options(const Config& c) {
  LoopOptions o;
  o.epochs = c.epochs;
  o.batch_size = c.batch_size;
  o.log_every = c.log_every;
  o.validate = c.validate;
  o.checkpoint = c.checkpoint;
  o.price_per_hour = c.price_per_hour;
  o.out_dir = c.out_dir;
  o.model = c.model;
  o.seed = c.seed;
  o.dist_timeout_s = c.dist_timeout_s;
  return o;
}

LrSchedule schedule_for(const Config& c, int64_t global_batch, int64_t steps_per_epoch) {
  LrSchedule schedule;
  schedule.peak_lr = scaled_lr(c.lr, global_batch);
  schedule.steps_per_epoch = steps_per_epoch;
  schedule.warmup_epochs = c.warmup_epochs;
  schedule.epochs = c.epochs;
  switch (c.lr_schedule) {
    case LrScheduleKind::kCosine:
      schedule.decay = LrSchedule::Decay::kCosine;
      break;
    case LrScheduleKind::kStep:
      schedule.decay = LrSchedule::Decay::kStep;
      break;
    case LrScheduleKind::kExponential:
      schedule.decay = LrSchedule::Decay::kExponential;
      break;
  }
  schedule.milestones = c.lr_milestones;
  schedule.gamma = c.lr_gamma;
  return schedule;
}

parallel::DistributedOptions distributed_options(const Config& c) {
  parallel::DistributedOptions o;
  o.timeout_s = c.dist_timeout_s;
  using B = parallel::DistributedOptions::Backend;
  switch (c.dist_backend) {
    case DistBackend::kAuto: o.backend = B::kAuto; break;
    case DistBackend::kNccl: o.backend = B::kNccl; break;
    case DistBackend::kGloo: o.backend = B::kGloo; break;
    case DistBackend::kShm: o.backend = B::kShm; break;
  }
  return o;
}

}  // namespace rn50::trainer
