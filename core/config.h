// core/config.h: the run configuration: one struct, read from YAML and the command line, validated once.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "core/image_limits.h"
#include "core/plan_search.h"

namespace rn50 {

// Choices, parsed once from their names (the key table lists them; name_of prints one).
enum class DataSource { kFolder, kSynthetic };  // folder | synthetic
enum class Decode { kCpu, kGpu };               // cpu | gpu
enum class LrScheduleKind { kCosine, kStep, kExponential };  // cosine | step | exponential
enum class Tf32 { kDefault, kOn, kOff };        // default | on | off
enum class Precision { kFp32, kBf16, kFp16 };   // fp32 | bf16 | fp16
enum class Fusion { kOff, kBatchNorm, kConv };  // off | bn | conv
enum class FusionKernels { kAuto, kRn50 };      // auto | rn50
enum class ConvPrologue { kTimed, kFused, kSeparate };  // timed | fused | separate
enum class WgradStream { kAuto, kOn, kOff };            // auto | on | off
enum class OptimizerKind { kSgd, kAdamW };      // sgd | adamw
enum class DistBackend { kAuto, kNccl, kGloo, kShm };  // auto | nccl | gloo | shm
std::string name_of(DataSource value);
std::string name_of(Decode value);
std::string name_of(LrScheduleKind value);
std::string name_of(Tf32 value);
std::string name_of(Precision value);
std::string name_of(Fusion value);
std::string name_of(FusionKernels value);
std::string name_of(ConvPrologue value);
std::string name_of(WgradStream value);
std::string name_of(PlanSearch value);
std::string name_of(OptimizerKind value);
std::string name_of(DistBackend value);

// decode: gpu: the images the decode threads decode themselves (docs/gpu-decoding.md): a fixed share of each
// batch, or automatic (as many as keep the threads ahead of the GPU decoder).
struct DecodeCpuShare {
  bool automatic = false;
  double fraction = 0;  // when not automatic: 0 (none, the default) to 1
};

struct Config {
  // model
  std::string model = "resnet50";
  bool zero_init_residual = true;

  // data
  DataSource data = DataSource::kFolder;
  std::string data_root;  // ROOT holding train/ and val/
  int image_size = 224;
  int val_resize = 256;
  int batch_size = 256;  // per process
  int workers = -1;      // decode threads; -1: the cores this process may use
  int prefetch = 4;      // batches decoded ahead
  bool pin_memory = true;
  bool pin_workers = false;      // decode thread k on one usable CPU each (no gain measured on 2 cores nor on 16)
  Decode decode = Decode::kCpu;  // cpu: libjpeg-turbo on the decode threads; gpu: nvJPEG, the threads only read files
  bool decode_yuv = false;       // decode: gpu: YCbCr planes out of the hardware decoder, converted in rn50's kernel
  bool decode_ahead = true;  // decode: gpu in training: batch k+N submitted right after step k (off: before its own)
  int decode_ahead_batches = 3;  // that N (docs/gpu-decoding.md: why 3)
  int gpu_decoders = 1;          // decode: gpu: decoders taking batches in turn, each with its own nvJPEG thread
  DecodeCpuShare decode_cpu_share;  // decode: gpu: auto, or 0 to 1 of each batch decoded by the decode threads
  bool strict_data = false;
  int64_t max_image_bytes = kDefaultMaxImageBytes;    // larger files are bad samples, never read
  int64_t max_image_pixels = kDefaultMaxImagePixels;  // width x height above this: a bad sample, never decoded
  int64_t decode_memory_mb = 0;      // decoded bytes in flight per process (data/decode_budget.h); 0: from the memory
  int64_t synthetic_images = 25600;  // images per epoch in synthetic mode

  // optimisation
  int epochs = 90;
  int64_t max_steps = 0;  // per epoch; 0 = the whole epoch
  double lr = 0.1;        // for a global batch of 256; scaled linearly with the global batch
  double warmup_epochs = 5.0;
  LrScheduleKind lr_schedule = LrScheduleKind::kCosine;
  std::vector<int> lr_milestones = {30, 60, 80};
  double lr_gamma = 0.1;
  OptimizerKind optimizer = OptimizerKind::kSgd;
  double momentum = 0.9;  // sgd
  double adamw_beta1 = 0.9, adamw_beta2 = 0.999, adamw_eps = 1e-8;
  double weight_decay = 1e-4;
  bool decay_bn_and_bias = false;  // weight decay on norm parameters and biases too
  double clip_grad_norm = 0;       // > 0: gradients clipped to this global L2 norm
  double label_smoothing = 0.1;
  double mixup_alpha = 0, cutmix_alpha = 0;  // 0: off
  double mixup_prob = 1.0, mixup_switch_prob = 0.5;
  double stochastic_depth = -1;  // < 0: the model's default
  double dropout = -1;           // < 0: the model's default

  // run
  std::string device = "auto";  // auto | cpu | cuda | cuda:N
  int64_t seed = 0;
  std::string out_dir = "runs/rn50";
  std::string resume;     // checkpoint to continue from
  std::string init_from;  // weights (torchvision layout) to start from
  int log_every = 50;     // steps between step records
  bool validate = true;
  bool checkpoint = true;     // write checkpoint.safetensors after every epoch
  bool overwrite = false;     // a fresh run may replace the checkpoints of an earlier run in out_dir
  bool report = true;         // write report.html (rn50 report) when the run ends
  double price_per_hour = 0;  // instance price per hour in any currency; > 0 adds costs to the epoch records

  // speed switches (GPU)
  Tf32 tf32 = Tf32::kDefault;
  Precision precision = Precision::kFp32;
  bool channels_last = false;
  bool cudnn_benchmark = false;
  bool deterministic = false;  // repeatable results: deterministic cuDNN algorithms and fused sums (no benchmark)
  bool cuda_graph = false;
  bool expandable_segments = false;
  Fusion fusion = Fusion::kOff;
  FusionKernels fusion_kernels = FusionKernels::kAuto;
  // fusion: conv: weight gradients on a second stream beside the data gradients (auto: but not with decode: gpu)
  WgradStream wgrad_stream = WgradStream::kAuto;
  ConvPrologue conv_prologue = ConvPrologue::kTimed;  // fusion: conv: where conv2's and conv3's prologues run
  std::string plan_cache = "auto";  // fusion: conv: the file keeping its timed choices between runs (auto, off, a path)
  PlanSearch plan_search = PlanSearch::kHeuristics;  // fusion: conv: how far each pattern's plan is looked for
  int stem_channels = 3;  // ResNets: the stem convolution's input channels, the image's 3 zero-padded to 4 or 8
  bool batched_casts = false;  // fusion: conv: the bottlenecks' float16 weights and their gradients cast in one launch
  bool fuse_stem_pool = false;  // fusion bn or conv: ResNets' stem BatchNorm+ReLU+max-pool as one op (ops/max_pool.h)
  std::string mig;  // list | MIG-<uuid> | instance index; empty: no MIG pinning

  // data parallel (several processes; see LaunchEnv)
  double bucket_mb = 25;     // gradient all-reduce bucket size
  bool nvlink = true;        // off: NCCL_P2P_DISABLE=1 for the run
  DistBackend dist_backend = DistBackend::kAuto;  // auto: NCCL with a GPU per rank, shm on a shared one, Gloo on CPUs
  int dist_timeout_s = 300;  // a collective or the rendezvous waiting longer than this stops the run
};

// One configuration key: its name, help text and how to read and print it. The YAML reader, the
// command line and the resolved-config dump all go through this one table.
struct ConfigKey {
  std::string name;
  std::string help;
  std::function<void(Config&, const std::string&)> parse;  // throws ConfigError naming the key
  std::function<std::string(const Config&)> print;
  bool on_off = false;  // an on/off switch: `--key` alone turns it on
  bool list = false;    // takes a YAML list (or comma-separated values); every other key takes one value
};
const std::vector<ConfigKey>& config_keys();

// Applies a YAML file's keys over `config`. Unknown keys and bad values throw ConfigError naming them.
void apply_yaml_file(Config& config, const std::string& path);
void apply_yaml_text(Config& config, const std::string& text, const std::string& origin);

// Applies key=value overrides (names as in the table).
void apply_overrides(Config& config, const std::map<std::string, std::string>& values);

// Checks ranges and combinations; throws ConfigError naming the key. Resolves automatic values
// (workers = -1) that do not need a device.
void validate(Config& config);

// The decode threads of workers: -1 for a process given `cores` usable cores: all of them, but with decode: gpu and
// decode_cpu_share: auto two fewer (at least one), left to the training thread and the GPU decoder's, whose host
// work the threads decoding as much as they can would otherwise crowd out.
int automatic_workers(const Config& config, int cores);

// The resolved configuration as YAML (every key, in table order), and as rows for the start-up table.
std::string to_yaml(const Config& config);
std::vector<std::pair<std::string, std::string>> to_rows(const Config& config);

}  // namespace rn50
