// models/resnet.cpp: ResNet v1.5 and ResNeXt with torchvision's module names, so that state dicts map one to one.
#include "models/resnet.h"

#include <torch/nn/functional/pooling.h>
#include <torch/nn/init.h>
#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>
#include <torch/utils.h>

#include <map>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "core/log.h"
#include "cuda/nvtx.h"
#include "models/blocks.h"
#include "models/stem.h"
#include "ops/fused_batch_norm.h"
#include "ops/fused_bottleneck.h"
#include "ops/fused_conv.h"
#include "ops/max_pool.h"
#include "ops/weight_cast.h"

namespace rn50::models {
namespace {

namespace nn = torch::nn;

nn::Conv2d conv(int64_t in, int64_t out, int64_t kernel, int64_t stride, int64_t groups = 1) {
  return nn::Conv2d(nn::Conv2dOptions(in, out, kernel).stride(stride).padding(kernel / 2).groups(groups).bias(false));
}

// Logs each distinct reason a bottleneck runs without the fused convolutions once, naming the first block it hit.
void log_fallback_once(const std::string& where, const std::string& why) {
  static std::mutex mutex;
  static std::set<std::string> seen;
  const std::lock_guard<std::mutex> lock(mutex);
  if (seen.insert(why).second) log_warn("fusion: conv: " + where + " runs fusion: bn's kernels: " + why);
}

// A residual block: torchvision's BasicBlock (two 3x3) or Bottleneck (1x1, 3x3 with the stride and `groups`, 1x1).
// `planes` is torchvision's: a bottleneck puts out planes * 4 channels, a basic block planes; a bottleneck's inner
// width is int(planes * width_per_group / 64) * groups (planes itself for a ResNet).
class Block : public nn::Module {
 public:
  Block(bool bottleneck, int64_t in, int64_t planes, int64_t stride, int64_t groups, int64_t width_per_group,
        const ModelOptions& mode, std::string where)
      : bottleneck_(bottleneck),
        stride_(stride),
        groups_(groups),
        mode_(mode),
        where_(std::move(where)),
        forward_range_(where_ + " forward"),
        backward_range_(where_ + " backward"),
        out_link_(bottleneck && mode.fusion == Fusion::kConv ? ops::make_boundary_link() : nullptr) {
    const int64_t expansion = bottleneck ? 4 : 1;
    const int64_t out = planes * expansion;
    if (bottleneck) {
      const int64_t width = planes * width_per_group / 64 * groups;
      conv1_ = register_module("conv1", conv(in, width, 1, 1));
      bn1_ = register_module("bn1", nn::BatchNorm2d(width));
      conv2_ = register_module("conv2", conv(width, width, 3, stride, groups));
      bn2_ = register_module("bn2", nn::BatchNorm2d(width));
      conv3_ = register_module("conv3", conv(width, out, 1, 1));
      bn3_ = register_module("bn3", nn::BatchNorm2d(out));
    } else {
      conv1_ = register_module("conv1", conv(in, planes, 3, stride));
      bn1_ = register_module("bn1", nn::BatchNorm2d(planes));
      conv2_ = register_module("conv2", conv(planes, planes, 3, 1));
      bn2_ = register_module("bn2", nn::BatchNorm2d(planes));
    }
    if (stride != 1 || in != out) {
      downsample_conv_ = conv(in, out, 1, stride);
      downsample_bn_ = nn::BatchNorm2d(out);
      downsample_ = register_module("downsample", nn::Sequential(downsample_conv_, downsample_bn_));
    }
  }

  // `copies`: float16 copies of fused_weights() made beforehand (batched_casts), or empty: the fused op casts them.
  // `in_link`: the previous block's output boundary (null for the first block), for bn3's backward across the two.
  at::Tensor forward(const at::Tensor& x, at::ArrayRef<at::Tensor> copies = {},
                     const std::shared_ptr<ops::BoundaryLink>& in_link = nullptr) {
    const cuda::NvtxRange profiled(forward_range_.c_str());
    if (is_training()) ran_fused_ = false;  // an evaluation in between leaves the training steps' batching as it was
    ops::reset_boundary_link(out_link_.get());  // armed again only by a fused forward of this call
    if (mode_.fusion == Fusion::kConv && bottleneck_ && is_training()) {
      ops::BottleneckParams p = params();
      p.in_link = in_link;
      p.out_link = out_link_;
      if (!copies.empty()) {
        p.w1 = copies[0];
        p.w2 = copies[1];
        p.w3 = copies[2];
        if (p.wd.defined()) p.wd = copies[3];
      }
      // A grouped block (ResNeXt) never runs fused: said once, as cuDNN's refusals are. The other static reasons
      // (layout, dtype, device, a BatchNorm in evaluation) are checked on every call: they are cheap and can change
      // between calls; the start-up table names the one that holds for the whole run.
      if (const std::string why = ops::bottleneck_geometry_unsupported_reason(p); !why.empty()) {
        log_fallback_once(where_, why);
      } else if (ops::bottleneck_unsupported_reason(x, p).empty() && fused_conv_ready(x, p)) {
        ran_fused_ = true;
        return ops::bottleneck_forward(x, p);
      }
    }
    at::Tensor y = bn_act(bn1_, conv1_->forward(x), {}, true, mode_);
    if (bottleneck_) y = bn_act(bn2_, conv2_->forward(y), {}, true, mode_);
    const at::Tensor last = (bottleneck_ ? conv3_ : conv2_)->forward(y);
    const at::Tensor identity =
        downsample_.is_empty() ? x : bn_act(downsample_bn_, downsample_conv_->forward(x), {}, false, mode_);
    return bn_act(last_bn(), last, identity, true, mode_);
  }

  // This block's output boundary with the next fused block (fusion: conv's bottlenecks), or null.
  const std::shared_ptr<ops::BoundaryLink>& out_link() const { return out_link_; }
  // Whether its last training forward ran fused (and so could arm that boundary where its residual is its input).
  bool ran_fused() const { return ran_fused_; }
  bool has_downsample() const { return !downsample_.is_empty(); }

  // The BatchNorm whose output joins the identity: zeroed for zero_init_residual.
  nn::BatchNorm2d last_bn() const { return bottleneck_ ? bn3_ : bn2_; }

  // The convolution weights the fused op casts to float16 (conv1, conv2, conv3, then the downsample's) if the last
  // training forward ran it; none otherwise.
  std::vector<at::Tensor> fused_weights() const {
    if (!ran_fused_) return {};
    std::vector<at::Tensor> w = {conv1_->weight, conv2_->weight, conv3_->weight};
    if (!downsample_.is_empty()) w.push_back(downsample_conv_->weight);
    return w;
  }

 private:
  ops::BottleneckParams params() const {
    ops::BottleneckParams p;
    p.w1 = conv1_->weight;
    p.w2 = conv2_->weight;
    p.w3 = conv3_->weight;
    p.bn1 = state_of(bn1_);
    p.bn2 = state_of(bn2_);
    p.bn3 = state_of(bn3_);
    if (!downsample_.is_empty()) {
      p.wd = downsample_conv_->weight;
      p.bnd = state_of(downsample_bn_);
    }
    p.stride = stride_;
    p.groups = groups_;
    p.wgrad_stream = mode_.wgrad_stream;
    p.prologue = mode_.conv_prologue;
    p.backward_range = backward_range_;
    return p;
  }

  // Whether this input runs the fused-convolution op: decided, and its plans built, on the first training input of
  // each shape and dtype (before a CUDA graph captures the step); a block cuDNN cannot plan stays on fusion: bn.
  bool fused_conv_ready(const at::Tensor& x, const ops::BottleneckParams& p) {
    const auto key = std::make_pair(x.sizes().vec(), static_cast<int>(x.scalar_type()));
    const auto it = ready_.find(key);
    if (it != ready_.end()) return it->second;
    const std::string why = ops::prepare_bottleneck(x, p);
    if (!why.empty()) log_fallback_once(where_, why);
    // conv_prologue: timed chose per pattern and shape while the probe planned this block; shapes met before are not
    // timed again (so not logged again).
    for (const std::string& choice : ops::take_prologue_choices()) log_info("fusion: conv: " + where_ + " " + choice);
    return ready_[key] = why.empty();
  }

  bool bottleneck_;
  int64_t stride_;
  int64_t groups_;
  ModelOptions mode_;
  std::string where_;       // e.g. "layer2.0", for logs
  std::string forward_range_, backward_range_;  // profilers' names for its work (cuda/nvtx.h)
  bool ran_fused_ = false;  // whether the last training forward ran the fused op
  std::shared_ptr<ops::BoundaryLink> out_link_;  // fusion: conv's bottlenecks: bn3's backward in the next block's
  std::map<std::pair<std::vector<int64_t>, int>, bool> ready_;
  nn::Conv2d conv1_{nullptr}, conv2_{nullptr}, conv3_{nullptr};
  nn::BatchNorm2d bn1_{nullptr}, bn2_{nullptr}, bn3_{nullptr};
  nn::Sequential downsample_{nullptr};  // downsample_conv_ then downsample_bn_, under torchvision's names 0 and 1
  nn::Conv2d downsample_conv_{nullptr};
  nn::BatchNorm2d downsample_bn_{nullptr};
};

class ResNet final : public Classifier {
 public:
  ResNet(bool bottleneck, const std::array<int, 4>& blocks, int64_t groups, int64_t width_per_group,
         const ModelOptions& options)
      : mode_(options), groups_(groups) {
    conv1_ = register_module("conv1", nn::Conv2d(nn::Conv2dOptions(3, 64, 7).stride(2).padding(3).bias(false)));
    bn1_ = register_module("bn1", nn::BatchNorm2d(64));
    int64_t in = 64;
    const int64_t widths[4] = {64, 128, 256, 512};
    for (int stage = 0; stage < 4; ++stage) {
      nn::ModuleList layer;
      for (int b = 0; b < blocks[stage]; ++b) {
        const int64_t stride = (stage > 0 && b == 0) ? 2 : 1;
        auto block = std::make_shared<Block>(bottleneck, in, widths[stage], stride, groups, width_per_group, mode_,
                                             "layer" + std::to_string(stage + 1) + "." + std::to_string(b));
        layer->push_back(block);
        blocks_.push_back(block);
        in = widths[stage] * (bottleneck ? 4 : 1);
      }
      register_module("layer" + std::to_string(stage + 1), layer);
    }
    fc_ = register_module("fc", nn::Linear(in, options.num_classes));
    initialise(options);
  }

  at::Tensor forward(const at::Tensor& images) override {
    if (mode_.fusion == Fusion::kConv && is_training() && !boundaries_logged_) log_boundaries_once();
    at::Tensor x;
    {
      const cuda::NvtxRange profiled("stem forward");
      // Images of 3 channels are padded here; the training sources write stem_channels ones (input_channels()).
      const at::Tensor stem = mode_.stem_channels > 3 ? stem_conv(images, conv1_->weight, mode_.stem_channels)
                                                      : conv1_->forward(images);
      if (mode_.fusion != Fusion::kOff && mode_.fuse_stem_pool) {
        x = ops::bn_relu_max_pool2d(stem, state_of(bn1_), ops::kStemMaxPool, mode_.bn_kernels);
      } else {
        x = bn_act(bn1_, stem, {}, true, mode_);
        // fusion: off stays torchvision's op; bn and conv take rn50's max-pool where it runs (ATen's op elsewhere).
        x = mode_.fusion == Fusion::kOff ? torch::nn::functional::max_pool2d(
                                               x, torch::nn::functional::MaxPool2dFuncOptions(3).stride(2).padding(1))
                                         : ops::max_pool2d(x, ops::kStemMaxPool);
      }
    }
    const std::vector<std::vector<at::Tensor>> copies = weight_copies();
    for (size_t i = 0; i < blocks_.size(); ++i) {
      x = blocks_[i]->forward(x, copies[i], i > 0 ? blocks_[i - 1]->out_link() : nullptr);
    }
    const cuda::NvtxRange profiled("head forward");
    x = x.mean({2, 3});  // global average pool; keeps the batch dimension
    return fc_->forward(x);
  }

  std::string classifier_name() const override { return "fc"; }

  // fusion: bn: which kernels the model's three kinds of BatchNorm get; a fallback to ATen's separate ops is also a
  // warning. fusion: conv: whether the bottlenecks can run on fused convolutions, then the same for the BatchNorms
  // outside them (the stem's) and for evaluation. Both: which max-pool the stem runs.
  std::string describe_fusion(const at::Tensor& example) const override {
    if (mode_.fusion == Fusion::kOff) {
      if (mode_.fuse_stem_pool) log_warn("fuse_stem_pool needs fusion: bn or conv; with fusion: off it is not used");
      return "off: ATen's separate BatchNorm, add and ReLU kernels";
    }
    const at::Tensor x = at::empty({2, 64, 4, 4}, example.options())
                             .contiguous(example.is_contiguous(at::MemoryFormat::ChannelsLast) && example.dim() == 4
                                             ? at::MemoryFormat::ChannelsLast
                                             : at::MemoryFormat::Contiguous);
    const char* name = mode_.fusion == Fusion::kConv ? "conv" : "bn";
    std::string conv;
    if (mode_.fusion == Fusion::kConv && groups_ != 1) {
      ops::BottleneckParams grouped;
      grouped.groups = groups_;
      conv = "conv: bottlenecks as bn (" + ops::bottleneck_geometry_unsupported_reason(grouped) + "); ";
    } else if (mode_.fusion == Fusion::kConv) {
      const std::string why_conv = ops::bottleneck_input_unsupported_reason(x);
      if (!why_conv.empty()) log_warn("fusion: conv runs the bottlenecks with fusion: bn's kernels: " + why_conv);
      const std::string wgrad = mode_.wgrad_stream ? "on a second stream" : "in line";
      const std::string casts = mode_.batched_casts ? "batched" : "one per weight";
      conv = why_conv.empty() ? "conv: bottlenecks on cuDNN's graph API (plans built on the first step; weight "
                                "gradients " +
                                    wgrad + "; prologues " + ops::to_string(mode_.conv_prologue) + "; weight casts " +
                                    casts + "); other BatchNorms and evaluation: "
                              : "conv: bottlenecks as bn (" + why_conv + "); ";
    }
    // The stem's max-pool on x: 64 channels as the stem's output has; its window, dtype and layout decide, not H and W.
    std::string pool = "; stem max-pool: " + ops::describe_max_pool(x, ops::kStemMaxPool);
    if (mode_.fuse_stem_pool) {
      // The stem's BatchNorm as training runs it, on x's device (the model may not be there yet).
      ops::BatchNormState stem;
      const auto floats = x.options().dtype(at::kFloat).memory_format(at::MemoryFormat::Contiguous);
      stem.weight = stem.bias = stem.running_mean = stem.running_var = at::empty({64}, floats);
      const std::string why = ops::bn_relu_max_pool_unsupported_reason(x, stem, ops::kStemMaxPool, mode_.bn_kernels);
      pool += why.empty() ? ", with the stem's BatchNorm+ReLU (training)" : " (BatchNorm+ReLU apart: " + why + ")";
    }
    const std::string why_not = ops::fused_unsupported_reason(x);
    if (!why_not.empty()) {
      log_warn(std::string("fusion: ") + name + " runs ATen's separate BatchNorm, add and ReLU kernels: " + why_not);
      return conv + "bn: ATen's separate ops (" + why_not + ")" + pool;
    }
    const ops::BnKernels kernels = mode_.bn_kernels;
    return conv + "bn (" + ops::to_string(kernels) + "): BatchNorm+ReLU " +
           ops::describe_kernels(x, false, true, kernels) + "; BatchNorm+add+ReLU " +
           ops::describe_kernels(x, true, true, kernels) + "; BatchNorm " +
           ops::describe_kernels(x, false, false, kernels) + pool;
  }

 private:
  // batched_casts: the float16 copies of the weights of every block whose last forward ran the fused op, made in one
  // launch (ops/weight_cast.h), one list per block (empty: the block casts its own). The first training step, which
  // plans the fused blocks, casts per weight; so does a block that stops running fused (its copy goes unused).
  std::vector<std::vector<at::Tensor>> weight_copies() const {
    std::vector<std::vector<at::Tensor>> per_block(blocks_.size());
    if (mode_.fusion != Fusion::kConv || !mode_.batched_casts || !is_training()) return per_block;
    std::vector<at::Tensor> weights;
    for (size_t i = 0; i < blocks_.size(); ++i) {
      per_block[i] = blocks_[i]->fused_weights();
      weights.insert(weights.end(), per_block[i].begin(), per_block[i].end());
    }
    // The fused op runs in float16 only; weights of another dtype (a model cast whole) stay with its own casts.
    if (weights.empty() || !ops::cast_weights_unsupported_reason(weights, at::kHalf).empty()) {
      return std::vector<std::vector<at::Tensor>>(blocks_.size());
    }
    const cuda::NvtxRange profiled("weight casts");
    const std::vector<at::Tensor> copies = ops::cast_weights(weights, at::kHalf);
    size_t next = 0;
    for (std::vector<at::Tensor>& block : per_block) {
      for (at::Tensor& w : block) w = copies[next++];  // each block's weights, now their copies, in the same order
    }
    return per_block;
  }

  // torchvision's initialisation: Kaiming normal (fan_out) convolutions, BatchNorm at (1, 0), the
  // classifier with nn.Linear's default; optionally the residual branch's last BatchNorm at 0.
  void initialise(const ModelOptions& options) {
    torch::NoGradGuard no_grad;
    for (auto& module : modules(/*include_self=*/false)) {
      if (auto* c = module->as<nn::Conv2d>()) {
        nn::init::kaiming_normal_(c->weight, 0.0, torch::kFanOut, torch::kReLU);
      } else if (auto* bn = module->as<nn::BatchNorm2d>()) {
        bn->weight.fill_(1.0);
        bn->bias.zero_();
      }
    }
    if (options.zero_init_residual) {
      for (const auto& block : blocks_) block->last_bn()->weight.zero_();
    }
  }

  // fusion: conv: at the second training forward, how many block boundaries the first step's backward ran as one
  // graph (bn3's backward inside the next block's input gradient), against how many pairs of fused blocks could: a
  // shape cuDNN refused shows here, not as an error.
  void log_boundaries_once() {
    const int64_t taken = ops::fused_boundaries_run().taken;
    if (boundaries_before_ < 0) {
      boundaries_before_ = taken;
      return;
    }
    boundaries_logged_ = true;
    int64_t possible = 0;
    for (size_t i = 0; i + 1 < blocks_.size(); ++i) {
      possible += blocks_[i]->ran_fused() && !blocks_[i]->has_downsample() && blocks_[i + 1]->ran_fused() ? 1 : 0;
    }
    if (possible == 0) return;  // no fused bottlenecks (CPU, ResNeXt, basic blocks): nothing to report
    log_info("fusion: conv: bn3's backward inside the next block's input gradient at " +
             std::to_string(taken - boundaries_before_) + " of " + std::to_string(possible) +
             " block boundaries in the first training step");
  }

  ModelOptions mode_;
  int64_t groups_;  // the bottlenecks' cardinality: 1 for a ResNet, 32 for resnext50_32x4d
  int64_t boundaries_before_ = -1;  // fused_boundaries_run().taken at the first training forward
  bool boundaries_logged_ = false;
  nn::Conv2d conv1_{nullptr};
  nn::BatchNorm2d bn1_{nullptr};
  std::vector<std::shared_ptr<Block>> blocks_;
  nn::Linear fc_{nullptr};
};

}  // namespace

std::shared_ptr<Classifier> make_resnet(int depth, const ModelOptions& options, int64_t groups,
                                        int64_t width_per_group) {
  const bool bottleneck = depth >= 50;
  if (!bottleneck && (groups != 1 || width_per_group != 64)) {
    throw std::invalid_argument("a ResNet of depth " + std::to_string(depth) + " has basic blocks: no groups");
  }
  switch (depth) {
    case 18:
      return std::make_shared<ResNet>(false, std::array<int, 4>{2, 2, 2, 2}, groups, width_per_group, options);
    case 34:
      return std::make_shared<ResNet>(false, std::array<int, 4>{3, 4, 6, 3}, groups, width_per_group, options);
    case 50:
      return std::make_shared<ResNet>(true, std::array<int, 4>{3, 4, 6, 3}, groups, width_per_group, options);
    case 101:
      return std::make_shared<ResNet>(true, std::array<int, 4>{3, 4, 23, 3}, groups, width_per_group, options);
    case 152:
      return std::make_shared<ResNet>(true, std::array<int, 4>{3, 8, 36, 3}, groups, width_per_group, options);
    default:
      throw std::invalid_argument("no ResNet of depth " + std::to_string(depth));
  }
}

}  // namespace rn50::models
