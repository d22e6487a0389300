// core/config.cpp: the key table, YAML and override parsing, validation and printing of Config.
#include "core/config.h"

#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <set>
#include <sstream>
#include <utility>
#include <vector>

#include "core/affinity.h"
#include "core/errors.h"
#include "core/files.h"
#include "core/utf8.h"

namespace rn50 {
namespace {

constexpr uintmax_t kMaxConfigBytes = 1 << 20;
// 16 TiB: past any host's memory, and its bytes still fit 64 bits many times over.
constexpr int64_t kMaxDecodeMemoryMb = int64_t{1} << 24;

// The value as the message shows it: escaped (a newline once cut the reason off) and at most 64 bytes of it (a
// million-digit number was once echoed whole).
[[noreturn]] void bad_value(const std::string& key, const std::string& value, const std::string& expected) {
  throw ConfigError("config key '" + key + "': '" + utf8::printable(value, 64) + "' is not " + expected);
}

std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t");
  if (b == std::string::npos) return "";
  const auto e = s.find_last_not_of(" \t");
  return s.substr(b, e - b + 1);
}

int64_t parse_int(const std::string& key, const std::string& raw) {
  const std::string v = trim(raw);
  errno = 0;
  char* end = nullptr;
  const long long x = std::strtoll(v.c_str(), &end, 10);
  if (v.empty() || *end != '\0' || errno == ERANGE) bad_value(key, raw, "an integer");
  return x;
}

double parse_double(const std::string& key, const std::string& raw, const char* expected = "a number") {
  const std::string v = trim(raw);
  errno = 0;
  char* end = nullptr;
  const double x = std::strtod(v.c_str(), &end);
  // An underflow (1e-310) is the tiny value strtod gives, not an error; an overflow is infinite.
  if (v.empty() || *end != '\0' || !std::isfinite(x)) bad_value(key, raw, expected);
  return x;
}

bool parse_bool(const std::string& key, const std::string& raw, const char* expected = "on or off") {
  std::string v = trim(raw);
  std::transform(v.begin(), v.end(), v.begin(), [](unsigned char c) { return std::tolower(c); });
  if (v == "on" || v == "true" || v == "yes" || v == "1") return true;
  if (v == "off" || v == "false" || v == "no" || v == "0") return false;
  bad_value(key, raw, expected);
}

// Ten digits where they give x back (0.1, not 0.10000000000000001), otherwise as many as it takes: config.yaml must
// resume the run it records (momentum 0.99999999999 was once written as 1, which a resume then refused).
std::string format_double(double x) {
  for (const int digits : {10, 17}) {
    std::ostringstream os;
    os.precision(digits);
    os << x;
    if (digits == 17 || std::strtod(os.str().c_str(), nullptr) == x) return os.str();
  }
  return {};
}

template <typename T>
ConfigKey int_key(const char* name, T Config::*member, const char* help) {
  return {name, help,
          [=](Config& c, const std::string& v) {
            const int64_t x = parse_int(name, v);
            if (x < std::numeric_limits<T>::min() || x > std::numeric_limits<T>::max()) bad_value(name, v, "in range");
            c.*member = static_cast<T>(x);
          },
          [=](const Config& c) { return std::to_string(c.*member); }};
}

ConfigKey double_key(const char* name, double Config::*member, const char* help) {
  return {name, help, [=](Config& c, const std::string& v) { c.*member = parse_double(name, v); },
          [=](const Config& c) { return format_double(c.*member); }};
}

ConfigKey bool_key(const char* name, bool Config::*member, const char* help) {
  return {name, help, [=](Config& c, const std::string& v) { c.*member = parse_bool(name, v); },
          [=](const Config& c) { return std::string(c.*member ? "on" : "off"); }, /*on_off=*/true};
}

// decode_cpu_share: auto, or a fraction (its range is checked with the other keys').
ConfigKey cpu_share_key(const char* name, DecodeCpuShare Config::*member, const char* help) {
  return {name, help,
          [=](Config& c, const std::string& v) {
            c.*member = trim(v) == "auto" ? DecodeCpuShare{true, 0}
                                          : DecodeCpuShare{false, parse_double(name, v, "auto or a number")};
          },
          [=](const Config& c) {
            const DecodeCpuShare& share = c.*member;
            return share.automatic ? std::string("auto") : format_double(share.fraction);
          }};
}

// UTF-8 as RFC 3629 allows it (no overlong forms, surrogates or code points past U+10FFFF).
bool valid_utf8(const std::string& s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    const int n = c < 0x80 ? 0 : (c >> 5) == 0x6 ? 1 : (c >> 4) == 0xE ? 2 : (c >> 3) == 0x1E ? 3 : -1;
    if (n < 0 || i + static_cast<size_t>(n) >= s.size()) return false;  // a bad lead byte, or cut short
    uint32_t cp = n == 0 ? c : c & (0x3F >> n);
    for (int k = 1; k <= n; ++k) {
      const auto d = static_cast<unsigned char>(s[i + k]);
      if ((d >> 6) != 0x2) return false;
      cp = (cp << 6) | (d & 0x3F);
    }
    const uint32_t min[] = {0, 0x80, 0x800, 0x10000};
    if (cp < min[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i += static_cast<size_t>(n) + 1;
  }
  return true;
}

ConfigKey string_key(const char* name, std::string Config::*member, const char* help) {
  // Text only: the resolved configuration is written as YAML, which holds UTF-8 and nothing else.
  return {name, help,
          [=](Config& c, const std::string& v) {
            if (!valid_utf8(v)) throw ConfigError(std::string("config key '") + name + "': not valid UTF-8 text");
            // Control characters (a NUL, a carriage return) end or break a path or a name where the operating
            // system or YAML's reader meets them, and the dump of some does not load back as the same text
            // (fuzz_config found a NUL read as a carriage return). A tab is allowed.
            for (const char ch : v) {
              const auto u = static_cast<unsigned char>(ch);
              if ((u < 0x20 && u != '\t') || u == 0x7f) {
                char hex[8];
                std::snprintf(hex, sizeof hex, "0x%02X", static_cast<unsigned>(u));
                throw ConfigError(std::string("config key '") + name + "': contains a control character (" + hex + ")");
              }
            }
            c.*member = trim(v);
          },
          [=](const Config& c) { return c.*member; }};
}

// The names of each choice, in the order the help lists them.
template <class E>
using Names = std::vector<std::pair<E, const char*>>;
const Names<DataSource>& names(DataSource) {
  static const Names<DataSource> n = {{DataSource::kFolder, "folder"}, {DataSource::kSynthetic, "synthetic"}};
  return n;
}
const Names<Decode>& names(Decode) {
  static const Names<Decode> n = {{Decode::kCpu, "cpu"}, {Decode::kGpu, "gpu"}};
  return n;
}
const Names<LrScheduleKind>& names(LrScheduleKind) {
  static const Names<LrScheduleKind> n = {{LrScheduleKind::kCosine, "cosine"},
                                          {LrScheduleKind::kStep, "step"},
                                          {LrScheduleKind::kExponential, "exponential"}};
  return n;
}
const Names<Tf32>& names(Tf32) {
  static const Names<Tf32> n = {{Tf32::kDefault, "default"}, {Tf32::kOn, "on"}, {Tf32::kOff, "off"}};
  return n;
}
const Names<Precision>& names(Precision) {
  static const Names<Precision> n = {
      {Precision::kFp32, "fp32"}, {Precision::kBf16, "bf16"}, {Precision::kFp16, "fp16"}};
  return n;
}

const Names<Fusion>& names(Fusion) {
  static const Names<Fusion> n = {{Fusion::kOff, "off"}, {Fusion::kBatchNorm, "bn"}, {Fusion::kConv, "conv"}};
  return n;
}
const Names<OptimizerKind>& names(OptimizerKind) {
  static const Names<OptimizerKind> n = {{OptimizerKind::kSgd, "sgd"}, {OptimizerKind::kAdamW, "adamw"}};
  return n;
}
const Names<DistBackend>& names(DistBackend) {
  static const Names<DistBackend> n = {{DistBackend::kAuto, "auto"},
                                       {DistBackend::kNccl, "nccl"},
                                       {DistBackend::kGloo, "gloo"},
                                       {DistBackend::kShm, "shm"}};
  return n;
}
const Names<ConvPrologue>& names(ConvPrologue) {
  static const Names<ConvPrologue> n = {
      {ConvPrologue::kTimed, "timed"}, {ConvPrologue::kFused, "fused"}, {ConvPrologue::kSeparate, "separate"}};
  return n;
}
const Names<PlanSearch>& names(PlanSearch) {
  static const Names<PlanSearch> n = {{PlanSearch::kHeuristics, "heuristics"}, {PlanSearch::kExhaustive, "exhaustive"}};
  return n;
}
const Names<WgradStream>& names(WgradStream) {
  static const Names<WgradStream> n = {
      {WgradStream::kAuto, "auto"}, {WgradStream::kOn, "on"}, {WgradStream::kOff, "off"}};
  return n;
}
const Names<FusionKernels>& names(FusionKernels) {
  static const Names<FusionKernels> n = {{FusionKernels::kAuto, "auto"}, {FusionKernels::kRn50, "rn50"}};

  return n;
}

template <class E>
std::string name_in_table(E value) {
  for (const auto& [v, n] : names(E{})) {
    if (v == value) return n;
  }
  return "?";
}

// A key whose value is one of a choice's names.
template <class E>
ConfigKey choice_key(const char* name, E Config::*member, const std::string& help) {
  std::string joined;
  for (const auto& entry : names(E{})) joined += (joined.empty() ? "" : "|") + std::string(entry.second);
  return {name, help + " (" + joined + ")",
          [=](Config& c, const std::string& v) {
            const std::string t = trim(v);
            for (const auto& [value, n] : names(E{})) {
              if (t == n) {
                c.*member = value;
                return;
              }
            }
            bad_value(name, v, "one of " + joined);
          },
          [=](const Config& c) { return name_in_table(c.*member); }};
}

// wgrad_stream: auto, or on and off in every spelling a switch takes (it was one before auto; `--wgrad-stream` alone
// still turns it on).
ConfigKey wgrad_key(const char* name, WgradStream Config::*member, const std::string& help) {
  return {name, help + " (auto|on|off)",
          [=](Config& c, const std::string& v) {
            std::string t = trim(v);
            std::transform(t.begin(), t.end(), t.begin(), [](unsigned char ch) { return std::tolower(ch); });
            c.*member = t == "auto"                              ? WgradStream::kAuto
                        : parse_bool(name, v, "auto, on or off") ? WgradStream::kOn
                                                                 : WgradStream::kOff;
          },
          [=](const Config& c) { return name_in_table(c.*member); }, /*on_off=*/true};
}

ConfigKey int_list_key(const char* name, std::vector<int> Config::*member, const char* help) {
  return {name,
          help,
          [=](Config& c, const std::string& v) {
            std::vector<int> out;
            std::string item;
            std::istringstream is(v);
            while (std::getline(is, item, ',')) {
              if (trim(item).empty()) continue;
              const int64_t x = parse_int(name, item);
              if (x < 0 || x > std::numeric_limits<int>::max()) bad_value(name, item, "an epoch number");
              out.push_back(static_cast<int>(x));
            }
            c.*member = out;
          },
          [=](const Config& c) {
            std::string s;
            for (int x : c.*member) s += (s.empty() ? "" : ",") + std::to_string(x);
            return s;
          },
          /*on_off=*/false,
          /*list=*/true};
}

std::vector<ConfigKey> make_keys() {
  using C = Config;
  return {
      string_key("model", &C::model, "model name, one of the registry's"),
      bool_key("zero_init_residual", &C::zero_init_residual, "zero-init the last BatchNorm of each residual block"),
      choice_key("data", &C::data,
                 "folder: JPEGs under data_root; synthetic: random batches made on the device (compute only)"),
      string_key("data_root", &C::data_root, "dataset folder holding train/<class>/*.JPEG and val/<class>/*.JPEG"),
      int_key("image_size", &C::image_size, "training and validation crop size in pixels"),
      int_key("val_resize", &C::val_resize, "validation: shorter side resized to this before the centre crop"),
      int_key("batch_size", &C::batch_size, "images per step per process"),
      int_key("workers", &C::workers, "decode threads; 0 decodes on the training thread; -1: the usable cores"),
      int_key("prefetch", &C::prefetch, "batches decoded ahead of the training step"),
      bool_key("pin_memory", &C::pin_memory, "decode into page-locked host memory and copy asynchronously (GPU)"),
      bool_key("pin_workers", &C::pin_workers,
               "pin decode thread k to one usable CPU each (the process's k-th, after those of lower local ranks)"),
      choice_key("decode", &C::decode,
                 "where JPEGs are decoded and augmented: cpu (libjpeg-turbo on the decode threads) or gpu (nvJPEG and "
                 "one kernel on the device; the decode threads only read files)"),
      bool_key(
          "decode_yuv", &C::decode_yuv,
          "decode: gpu: the hardware decoder hands out the JPEG's YCbCr planes and rn50's crop kernel converts only "
          "the pixels it samples (off: nvJPEG converts every whole image to RGB, one kernel per image)"),
      bool_key("decode_ahead", &C::decode_ahead,
               "decode: gpu: hand batch k+N (N: decode_ahead_batches) to the decode thread right after training step k "
               "is queued, and the next epoch's first N during an epoch's last N steps unless a validation follows "
               "(off: each batch decoded right before its own step)"),
      int_key("decode_ahead_batches", &C::decode_ahead_batches,
              "decode: gpu with decode_ahead: batches handed to the decode thread ahead of their step, 1 to 4 (each "
              "holds a batch of decoded images on the device)"),
      int_key("gpu_decoders", &C::gpu_decoders,
              "decode: gpu: decoders taking the batches in turn, 1 to 4, each with its own thread of nvJPEG calls and "
              "its own device buffers (measured slower with 2 than with 1 on an H100: their calls do not overlap)"),
      cpu_share_key("decode_cpu_share", &C::decode_cpu_share,
                    "decode: gpu: the images the decode threads decode themselves, the rest left to the GPU: auto "
                    "(as many as keep them two batches ahead; workers -1 then leaves two cores to the training and "
                    "GPU decode threads) or a share of each batch, 0 to 1"),
      bool_key("strict_data", &C::strict_data, "stop at the first unreadable image instead of skipping it"),
      int_key("max_image_bytes", &C::max_image_bytes,
              "an image file larger than this is a bad sample, never read (a photo is a few MB)"),
      int_key("max_image_pixels", &C::max_image_pixels,
              "an image whose header claims more pixels (width x height) is a bad sample, never decoded (Pillow's "
              "decompression-bomb limit; a 12000x12000 photo is 144 million)"),
      int_key("decode_memory_mb", &C::decode_memory_mb,
              "MiB of decoded images the decode threads may hold at once, per process; an image larger than that "
              "decodes alone (0: a quarter of the cgroup memory limit, else of the machine's memory, shared by the "
              "processes of a launch on this host)"),
      int_key("synthetic_images", &C::synthetic_images, "images per epoch when data is synthetic"),
      int_key("epochs", &C::epochs, "epochs to train"),
      int_key("max_steps", &C::max_steps, "stop each epoch after this many steps (0: the whole epoch)"),
      double_key("lr", &C::lr, "peak learning rate for a global batch of 256, scaled linearly with the batch"),
      double_key("warmup_epochs", &C::warmup_epochs, "epochs of linear learning-rate warm-up"),
      choice_key("lr_schedule", &C::lr_schedule, "decay after warm-up"),
      int_list_key(
          "lr_milestones", &C::lr_milestones,
          "step schedule: epochs (from the start, warm-up included) at which the rate is multiplied by lr_gamma"),
      double_key("lr_gamma", &C::lr_gamma, "step: factor at each milestone; exponential: factor each epoch"),
      choice_key("optimizer", &C::optimizer,
                 "sgd (momentum SGD) or adamw (AdamW, decoupled weight decay); one fused kernel over all parameters "
                 "on a GPU"),
      double_key("momentum", &C::momentum, "SGD momentum"),
      double_key("adamw_beta1", &C::adamw_beta1, "AdamW: decay of the first moment"),
      double_key("adamw_beta2", &C::adamw_beta2, "AdamW: decay of the second moment"),
      double_key("adamw_eps", &C::adamw_eps, "AdamW: added to the second moment's root"),
      double_key("weight_decay", &C::weight_decay,
                 "weight decay: L2 for sgd, decoupled for adamw; none on 1-D parameters (norms, biases) nor on a "
                 "vision transformer's position embedding and class token"),
      bool_key("decay_bn_and_bias", &C::decay_bn_and_bias,
               "apply weight decay to norm parameters, biases and embeddings too"),
      double_key("clip_grad_norm", &C::clip_grad_norm,
                 "clip the gradients to this global L2 norm before each update, on the device (0: off)"),
      double_key("label_smoothing", &C::label_smoothing, "label smoothing of the cross-entropy loss"),
      double_key("mixup_alpha", &C::mixup_alpha,
                 "mixup: each batch blended with itself reversed, the weight drawn from Beta(alpha, alpha) (0: off)"),
      double_key("cutmix_alpha", &C::cutmix_alpha,
                 "cutmix: a box of each image replaced by the reversed batch's, its area from Beta(alpha, alpha) "
                 "(0: off)"),
      double_key("mixup_prob", &C::mixup_prob, "mixup/cutmix: the chance that a batch is mixed"),
      double_key("mixup_switch_prob", &C::mixup_switch_prob,
                 "with both mixup and cutmix on, the chance that a mixed batch takes cutmix"),
      double_key("stochastic_depth", &C::stochastic_depth,
                 "the deepest residual branch's chance to be dropped in training, rising linearly with depth, where "
                 "the model has stochastic depth (-1: the model's torchvision default)"),
      double_key("dropout", &C::dropout,
                 "dropout before the classifier, where the model has it (-1: the model's torchvision default)"),
      string_key("device", &C::device, "auto|cpu|cuda|cuda:N"),
      int_key("seed", &C::seed, "seed of initialisation, shuffling and augmentation"),
      string_key("out_dir", &C::out_dir, "folder for the log, metrics, resolved config and checkpoints"),
      string_key("resume", &C::resume,
                 "a run folder (or its checkpoint) to continue where it stopped, mid-epoch included"),
      string_key("init_from", &C::init_from,
                 "safetensors weights in torchvision's layout to start from (all of them, or all but the "
                 "classifier when the class count differs: fine-tuning)"),
      int_key("log_every", &C::log_every, "steps between step records in the log and metrics"),
      bool_key("validate", &C::validate, "evaluate on the validation split after every epoch"),
      bool_key("checkpoint", &C::checkpoint,
               "write checkpoint.safetensors after every epoch (off: for timing runs that keep nothing)"),
      bool_key("overwrite", &C::overwrite,
               "let a fresh run replace the checkpoints an earlier run left in out_dir (off: such a run is refused; "
               "--resume continues it)"),
      bool_key("report", &C::report,
               "write report.html in out_dir when the run ends, as rn50 report does (off: none; rank 0 only)"),
      double_key("price_per_hour", &C::price_per_hour,
                 "instance price per hour (any currency): each epoch record gets cost_per_epoch and "
                 "projected_run_cost (0: off)"),
      choice_key("tf32", &C::tf32,
                 "TF32 math: default keeps LibTorch's defaults (TF32 in cuDNN convolutions, not in matrix "
                 "products); off is true FP32 everywhere; on allows TF32 everywhere"),
      choice_key("precision", &C::precision, "autocast precision of forward and backward (fp16 adds a loss scaler)"),
      bool_key("channels_last", &C::channels_last, "NHWC memory layout for images, weights and activations"),
      bool_key("cudnn_benchmark", &C::cudnn_benchmark, "let cuDNN time its algorithms and keep the fastest"),
      bool_key("deterministic", &C::deterministic,
               "repeatable results, for debugging and comparisons: cuDNN's deterministic algorithms (fusion: conv then "
               "also sums its epilogues in a fixed order and takes its first deterministic plans untimed); slower; "
               "needs cudnn_benchmark off"),
      bool_key("cuda_graph", &C::cuda_graph, "capture the whole training step in a CUDA graph and replay it"),
      bool_key("expandable_segments", &C::expandable_segments,
               "the CUDA caching allocator maps memory into segments that grow in place instead of caching fixed "
               "blocks (PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True): less memory reserved for the same step"),
      choice_key("fusion", &C::fusion,
                 "kernel fusion in the model: off (ATen's BatchNorm, add and ReLU kernels, one pass each), bn "
                 "(BatchNorm with its residual add and ReLU fused, forward and backward, for channels-last tensors on "
                 "a GPU; elsewhere the same ops, logged) or conv (bn, and each bottleneck block on cuDNN's graph API: "
                 "BatchNorm's statistics in its convolution's epilogue, its scale, bias and ReLU in the next one's "
                 "prologue; float16 on a GPU, elsewhere bn, logged)"),
      choice_key("fusion_kernels", &C::fusion_kernels,
                 "fusion: bn's kernels: auto (cuDNN's for BatchNorm+ReLU, rn50's for the rest: the fastest), or rn50 "
                 "(rn50's everywhere: no cuDNN reserve space kept for the backward)"),
      wgrad_key("wgrad_stream", &C::wgrad_stream,
                "fusion: conv: each bottleneck's weight gradients on a second CUDA stream, beside its data gradients "
                "(captured in the CUDA graph as parallel branches; the same kernels and results either way): on, "
                "off (in line), or auto: on, but off with decode: gpu (the graph's branches hold up nvJPEG's "
                "hardware calls)"),
      choice_key("conv_prologue", &C::conv_prologue,
                 "fusion: conv: where the previous BatchNorm's scale, bias and ReLU run for conv2 and conv3, forward "
                 "and in their weight gradients: fused (in the convolution), separate (a pass of its own, then the "
                 "plain convolution), or timed (the faster of the two, timed once per pattern and shape before the "
                 "step is captured; logged)"),
      string_key("plan_cache", &C::plan_cache,
                 "fusion: conv: a file that keeps the timed choices (each convolution pattern's cuDNN plan, each "
                 "prologue's form) between runs, so that a run on the same GPU, driver, cuDNN and rn50 build takes "
                 "them from it instead of timing them again: auto ($RN50_CACHE_DIR, else $XDG_CACHE_HOME/rn50, else "
                 "$HOME/.cache/rn50, file fusion-conv-plans.txt), off (every choice timed), or the file's path"),
      choice_key("plan_search", &C::plan_search,
                 "fusion: conv: which cuDNN plans are timed for each convolution pattern and shape: heuristics (the "
                 "first 16 configurations cuDNN's heuristics list that build) or exhaustive (those and every engine "
                 "that takes the graph with its knob settings enumerated, up to 96 more: on an H100 ResNet-50's first "
                 "epoch took 85 s against about 18, which the plan cache keeps for the next run; deterministic cuDNN "
                 "keeps heuristics)"),
      int_key("stem_channels", &C::stem_channels,
              "ResNets: the stem convolution's input channels: 3 (the image's), or 4 or 8 (zero channels added to the "
              "image and the weight each step: the same results, on cuDNN's kernels for those channel counts)"),
      bool_key("batched_casts", &C::batched_casts,
               "fusion: conv: the bottlenecks' float16 weight copies made in one launch before the forward and their "
               "gradients cast back to float32 in one after the backward, instead of a cast per weight each way (the "
               "same values; one process only: under data parallel the gradients would reach the buckets only at the "
               "backward's end, so it stays off there, logged)"),
      bool_key("fuse_stem_pool", &C::fuse_stem_pool,
               "fusion: bn or conv, ResNets: the stem's BatchNorm+ReLU+max-pool as one op on rn50's kernels in "
               "training: the pool normalises each element as it reads it, so the normalised tensor (the size of the "
               "stem's output) is neither written nor kept for the backward (the same values as the ops apart on "
               "rn50's kernels; with fusion_kernels: auto the stem's BatchNorm is otherwise cuDNN's)"),
      string_key("mig", &C::mig,
                 "MIG pinning: 'list' prints the GPU's MIG instances; a MIG UUID or instance index pins the run to "
                 "it (CUDA_VISIBLE_DEVICES=MIG-...) before CUDA starts"),
      double_key("bucket_mb", &C::bucket_mb,
                 "data parallel: gradients are all-reduced in buckets of about this many MB, each as soon as "
                 "the backward pass has filled it"),
      bool_key("nvlink", &C::nvlink, "data parallel: off sets NCCL_P2P_DISABLE=1 (no NVLink or PCIe peer copies)"),
      choice_key("dist_backend", &C::dist_backend,
                 "data parallel: auto (NCCL when each rank has a GPU of its own, shm when ranks share one, Gloo on "
                 "CPUs), nccl, gloo, or shm (ranks on one host, through shared host memory); gloo and shm on GPUs "
                 "copy gradients through host memory and take no CUDA graph"),
      int_key("dist_timeout_s", &C::dist_timeout_s,
              "data parallel: seconds a rendezvous or collective may wait for another rank before the run stops"),
  };
}

// Counts the documents of a YAML stream that hold anything but a null.
class DocumentCounter final : public YAML::EventHandler {
 public:
  int documents = 0;
  void OnDocumentStart(const YAML::Mark&) override { content_ = false; }
  void OnDocumentEnd() override { documents += content_ ? 1 : 0; }
  void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
  void OnAlias(const YAML::Mark&, YAML::anchor_t) override { content_ = true; }
  void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t, const std::string&) override { content_ = true; }
  void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {
    content_ = true;
  }
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {
    content_ = true;
  }
  void OnMapEnd() override {}

 private:
  bool content_ = false;
};

// The documents of `text` that hold anything (stopping at two). Not YAML::LoadAll: yaml-cpp 0.7 (Debian's) loops
// there for ever on some invalid input (",d", found by fuzz_config; yaml-cpp PR 1319), so the parser's documents are
// read here at most once per line of the text plus one, which bounds the loop.
int documents_with_content(const std::string& text) {
  std::istringstream in(text);
  YAML::Parser parser(in);
  DocumentCounter counter;
  const size_t most = static_cast<size_t>(std::count(text.begin(), text.end(), '\n')) + 2;
  for (size_t i = 0; i < most && counter.documents < 2 && parser.HandleNextDocument(counter); ++i) {
  }
  return counter.documents;
}

void apply_yaml_node(Config& config, const YAML::Node& root, const std::string& origin) {
  if (!root || root.IsNull()) return;
  if (!root.IsMap()) throw ConfigError(origin + ": expected a mapping of key: value");
  std::set<std::string> seen;  // a key given twice: which value was meant is not for rn50 to guess
  for (const auto& item : root) {
    if (!item.first.IsScalar()) throw ConfigError(origin + ": a key that is not a plain name");
    const std::string key = item.first.as<std::string>();
    const auto& keys = config_keys();
    const auto it = std::find_if(keys.begin(), keys.end(), [&](const ConfigKey& k) { return k.name == key; });
    if (it == keys.end()) throw ConfigError(origin + ": unknown config key '" + utf8::printable(key, 64) + "'");
    if (!seen.insert(key).second) throw ConfigError(origin + ": config key '" + key + "' is given twice");
    std::string value;
    if (item.second.IsSequence() && !it->list) {
      // Once joined with commas for any key: out_dir: [a, b] wrote into a folder named "a,b".
      throw ConfigError(origin + ": config key '" + key + "' takes one value, not a list");
    }
    if (item.second.IsSequence()) {
      for (const auto& v : item.second) {
        if (!v.IsScalar()) throw ConfigError(origin + ": config key '" + key + "' must be a list of values");
        value += (value.empty() ? "" : ",") + v.as<std::string>();
      }
    } else if (item.second.IsScalar()) {
      value = item.second.as<std::string>();
    } else if (item.second.IsNull()) {
      value = "";
    } else {
      throw ConfigError(origin + ": config key '" + key + "' must be a value or a list");
    }
    it->parse(config, value);
  }
}

}  // namespace

std::string name_of(DataSource value) { return name_in_table(value); }
std::string name_of(Decode value) { return name_in_table(value); }
std::string name_of(LrScheduleKind value) { return name_in_table(value); }
std::string name_of(Tf32 value) { return name_in_table(value); }
std::string name_of(Precision value) { return name_in_table(value); }
std::string name_of(Fusion value) { return name_in_table(value); }
std::string name_of(FusionKernels value) { return name_in_table(value); }
std::string name_of(ConvPrologue value) { return name_in_table(value); }
std::string name_of(WgradStream value) { return name_in_table(value); }
std::string name_of(PlanSearch value) { return name_in_table(value); }
std::string name_of(OptimizerKind value) { return name_in_table(value); }
std::string name_of(DistBackend value) { return name_in_table(value); }

const std::vector<ConfigKey>& config_keys() {
  static const std::vector<ConfigKey> keys = make_keys();
  return keys;
}

void apply_yaml_text(Config& config, const std::string& text, const std::string& origin) {
  if (text.size() > kMaxConfigBytes) {
    throw ConfigError(origin + ": " + std::to_string(text.size()) + " bytes of YAML; at most " +
                      std::to_string(kMaxConfigBytes) + " are read");
  }
  YAML::Node root;
  int documents = 0;
  try {
    root = YAML::Load(text);
    documents = documents_with_content(text);
  } catch (const YAML::Exception& e) {
    throw ConfigError(origin + ": not valid YAML: " + e.what());
  }
  // YAML::Load reads the first document alone: the keys after a "---" line were once ignored without a word.
  if (documents > 1 || (documents == 1 && (!root || root.IsNull()))) {
    throw ConfigError(origin +
                      ": keys in a YAML document after the first (after a --- line); a config file is one "
                      "document");
  }
  apply_yaml_node(config, root, origin);
}

void apply_yaml_file(Config& config, const std::string& path) {
  // A config file is a page of keys: a larger one, a folder or a device is refused before any of it is read.
  std::vector<uint8_t> bytes;
  try {
    files::read_whole(path, kMaxConfigBytes, bytes);
  } catch (const files::ReadError& e) {
    if (e.kind == files::ReadError::Kind::kNotRegular)
      throw ConfigError("config file " + path + " is not a regular file");
    if (e.kind == files::ReadError::Kind::kTooLarge) {
      throw ConfigError("config file " + path + " is " + std::to_string(e.size) + " bytes; at most " +
                        std::to_string(kMaxConfigBytes) + " are read");
    }
    throw ConfigError("config file: " + std::string(e.what()));  // "cannot read PATH: the reason"
  }
  apply_yaml_text(config, std::string(bytes.begin(), bytes.end()), path);
}

void apply_overrides(Config& config, const std::map<std::string, std::string>& values) {
  const auto& keys = config_keys();
  for (const auto& entry : values) {
    const std::string& name = entry.first;  // not a structured binding: C++17 lambdas cannot capture one
    const auto it = std::find_if(keys.begin(), keys.end(), [&](const ConfigKey& k) { return k.name == name; });
    if (it == keys.end()) throw ConfigError("unknown config key '" + name + "'");
    it->parse(config, entry.second);
  }
}

void validate(Config& c) {
  auto require = [](bool ok, const std::string& key, const std::string& what) {
    if (!ok) throw ConfigError("config key '" + key + "': " + what);
  };
  require(c.image_size >= 16 && c.image_size <= 1024, "image_size", "must be between 16 and 1024");
  require(c.val_resize >= c.image_size, "val_resize", "must be at least image_size");
  // Upper bounds too: each is far above any real run and keeps the counts and times derived from it from
  // overflowing. They are typo guards, not a memory bound: their product can exceed any host's memory.
  require(c.batch_size >= 1 && c.batch_size <= 65536, "batch_size", "must be 1 to 65536");
  require(c.workers >= -1 && c.workers <= 4096, "workers", "must be -1 (auto), or 0 to 4096");
  require(c.prefetch >= 1 && c.prefetch <= 64, "prefetch", "must be 1 to 64 (each holds a batch in host memory)");
  require(c.max_image_bytes >= 1, "max_image_bytes", "must be at least 1");
  require(c.max_image_pixels >= 1, "max_image_pixels", "must be at least 1");
  require(c.decode_memory_mb >= 0 && c.decode_memory_mb <= kMaxDecodeMemoryMb, "decode_memory_mb",
          "must be 0 (automatic) to " + std::to_string(kMaxDecodeMemoryMb) + " (16 TiB)");
  require(c.decode_ahead_batches >= 1 && c.decode_ahead_batches <= 4, "decode_ahead_batches", "must be 1 to 4");
  require(c.gpu_decoders >= 1 && c.gpu_decoders <= 4, "gpu_decoders", "must be 1 to 4");
  require(c.stem_channels == 3 || c.stem_channels == 4 || c.stem_channels == 8, "stem_channels", "must be 3, 4 or 8");
  require(!c.plan_cache.empty(), "plan_cache", "must be auto, off or a file's path");
  require(c.decode_cpu_share.automatic || (c.decode_cpu_share.fraction >= 0 && c.decode_cpu_share.fraction <= 1),
          "decode_cpu_share", "must be auto or 0 to 1");
  require(c.decode == Decode::kGpu || (!c.decode_cpu_share.automatic && c.decode_cpu_share.fraction == 0),
          "decode_cpu_share", "needs decode: gpu (with decode: cpu the decode threads decode every image already)");
  require(c.decode == Decode::kGpu || c.gpu_decoders == 1, "gpu_decoders", "needs decode: gpu");
  require(c.decode_ahead || c.gpu_decoders == 1, "gpu_decoders",
          "needs decode_ahead (without it each batch is decoded right before its step, one at a time)");
  require(c.synthetic_images >= c.batch_size || c.data != DataSource::kSynthetic, "synthetic_images",
          "must be at least batch_size");
  require(c.synthetic_images <= (int64_t{1} << 40), "synthetic_images", "must be at most 2^40");
  require(c.epochs >= 1 && c.epochs <= 1000000, "epochs", "must be 1 to 1000000");
  require(c.max_steps >= 0, "max_steps", "must be 0 (whole epoch) or more");
  require(c.lr > 0 && c.lr <= 100, "lr", "must be in (0, 100] (for a batch of 256)");
  require(c.warmup_epochs >= 0 && c.warmup_epochs <= 10000, "warmup_epochs", "must be 0 to 10000");
  require(c.lr_gamma > 0 && c.lr_gamma <= 1, "lr_gamma", "must be in (0, 1]");
  require(std::adjacent_find(c.lr_milestones.begin(), c.lr_milestones.end(), std::greater_equal<int>()) ==
              c.lr_milestones.end(),
          "lr_milestones", "must be strictly increasing");
  require(c.momentum >= 0 && c.momentum < 1, "momentum", "must be in [0, 1)");
  // AdamW computes in 32-bit floats: a beta that rounds to 1 there makes its bias correction 1 - beta^t zero, and an
  // eps that rounds to 0 divides by zero; either turned the loss NaN at the second step.
  require(c.adamw_beta1 >= 0 && static_cast<float>(c.adamw_beta1) < 1.0f, "adamw_beta1",
          "must be in [0, 1), and below 1 as a 32-bit float (0.99999994 at most)");
  require(c.adamw_beta2 >= 0 && static_cast<float>(c.adamw_beta2) < 1.0f, "adamw_beta2",
          "must be in [0, 1), and below 1 as a 32-bit float (0.99999994 at most)");
  require(c.adamw_eps > 0 && c.adamw_eps <= 1 && static_cast<float>(c.adamw_eps) > 0.0f, "adamw_eps",
          "must be in (0, 1], and above 0 as a 32-bit float (1e-45 at least)");
  require(c.clip_grad_norm >= 0 && c.clip_grad_norm <= 1e6, "clip_grad_norm", "must be 0 (off) to 1e6");
  require(c.mixup_alpha >= 0 && c.mixup_alpha <= 100, "mixup_alpha", "must be 0 (off) to 100");
  require(c.cutmix_alpha >= 0 && c.cutmix_alpha <= 100, "cutmix_alpha", "must be 0 (off) to 100");
  require(c.mixup_prob >= 0 && c.mixup_prob <= 1, "mixup_prob", "must be in [0, 1]");
  require(c.mixup_switch_prob >= 0 && c.mixup_switch_prob <= 1, "mixup_switch_prob", "must be in [0, 1]");
  require(c.stochastic_depth == -1 || (c.stochastic_depth >= 0 && c.stochastic_depth < 1), "stochastic_depth",
          "must be -1 (the model's default) or in [0, 1)");
  require(c.dropout == -1 || (c.dropout >= 0 && c.dropout < 1), "dropout",
          "must be -1 (the model's default) or in [0, 1)");
  require(c.weight_decay >= 0 && c.weight_decay <= 1, "weight_decay", "must be in [0, 1]");
  require(c.label_smoothing >= 0 && c.label_smoothing < 1, "label_smoothing", "must be in [0, 1)");
  require(c.log_every >= 1, "log_every", "must be at least 1");
  require(c.price_per_hour >= 0 && c.price_per_hour <= 1e9, "price_per_hour", "must be 0 (off) to 1e9");
  require(!c.out_dir.empty(), "out_dir", "must not be empty");
  require(c.data == DataSource::kSynthetic || !c.data_root.empty(), "data_root", "is required when data is folder");
  require(c.resume.empty() || c.init_from.empty(), "init_from",
          "conflicts with resume (a resumed run continues from its checkpoint's weights)");

  const bool cpu = c.device == "cpu";
  const bool cuda = c.device == "cuda" || c.device.rfind("cuda:", 0) == 0;
  require(cpu || cuda || c.device == "auto", "device", "'" + c.device + "' is not auto, cpu, cuda or cuda:N");
  if (c.device.rfind("cuda:", 0) == 0) {
    const std::string index = c.device.substr(5);
    require(!index.empty() && index.find_first_not_of("0123456789") == std::string::npos, "device",
            "'" + c.device + "' needs a GPU index, like cuda:0");
  }
  require(!(c.deterministic && c.cudnn_benchmark), "deterministic",
          "needs cudnn_benchmark: off (the benchmark chooses algorithms by timing, which can differ from run to run)");
  require(c.bucket_mb > 0 && c.bucket_mb <= 4096, "bucket_mb", "must be in (0, 4096]");
  require(c.dist_timeout_s >= 1 && c.dist_timeout_s <= 604800, "dist_timeout_s", "must be 1 to 604800 (a week)");
  require(!(cpu && c.precision != Precision::kFp32), "precision",
          name_of(c.precision) + " (autocast) needs a CUDA device; use fp32 on cpu");
  require(!(cpu && c.decode == Decode::kGpu), "decode", "gpu needs a CUDA device; use decode: cpu on the cpu");

  require(c.mig.empty() || c.mig == "list" || cuda || c.device == "auto", "mig", "needs a CUDA device");

  if (c.workers == -1) c.workers = automatic_workers(c, usable_cores());
}

int automatic_workers(const Config& config, int cores) {
  const bool leave_two = config.decode == Decode::kGpu && config.decode_cpu_share.automatic;
  return std::max(1, leave_two ? cores - 2 : cores);
}

namespace {

// A value as a YAML scalar that reads back as the same string: quoted and escaped where a plain scalar would not
// (": ", " #", a leading quote or bracket, control or non-ASCII bytes), plain otherwise.
std::string yaml_scalar(const std::string& value) {
  if (value.empty()) return "\"\"";
  YAML::Emitter out;
  out.SetOutputCharset(YAML::EscapeNonAscii);
  out << value;
  return out.good() ? out.c_str() : "\"\"";
}

}  // namespace

std::string to_yaml(const Config& config) {
  std::string out;
  for (const auto& key : config_keys()) {
    const std::string value = key.print(config);
    out += key.name + ": ";
    out += key.name == "lr_milestones" ? "[" + value + "]" : yaml_scalar(value);
    out += "\n";
  }
  return out;
}

std::vector<std::pair<std::string, std::string>> to_rows(const Config& config) {
  std::vector<std::pair<std::string, std::string>> rows;
  for (const auto& key : config_keys()) rows.emplace_back(key.name, key.print(config));
  return rows;
}

}  // namespace rn50
