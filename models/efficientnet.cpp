// models/efficientnet.cpp: EfficientNet-B0 with torchvision's module names (features.N.M.block.K), so that state
// dicts map one to one.
#include "models/model.h"

#include <ATen/ATen.h>
#include <torch/nn/init.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>
#include <torch/utils.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "core/log.h"
#include "models/blocks.h"
#include "ops/fused_batch_norm.h"

namespace rn50::models {
namespace {

namespace nn = torch::nn;

constexpr double kStochasticDepth = 0.2, kDropout = 0.2;  // efficientnet_b0's
constexpr int64_t kLastChannels = 1280;

// torchvision's Conv2dNormActivation: a convolution without bias (0) and BatchNorm2d (1, eps 1e-5, momentum 0.1),
// then SiLU unless it is a projection.
class ConvNormAct : public nn::Module {
 public:
  ConvNormAct(int64_t in, int64_t out, int64_t kernel, int64_t stride, int64_t groups, bool silu,
              const ModelOptions& options)
      : silu_(silu), options_(options) {
    conv_ = register_module(
        "0",
        nn::Conv2d(
            nn::Conv2dOptions(in, out, kernel).stride(stride).padding((kernel - 1) / 2).groups(groups).bias(false)));
    bn_ = register_module("1", nn::BatchNorm2d(out));
  }

  // A projection's BatchNorm has no activation: under fusion it runs the fused BatchNorm op (ops::batch_norm_act).
  at::Tensor forward(const at::Tensor& x) {
    const at::Tensor y = conv_->forward(x);
    return silu_ ? norm_act_silu(bn_, y, options_) : bn_act(bn_, y, {}, false, options_);
  }

 private:
  bool silu_;
  ModelOptions options_;
  nn::Conv2d conv_{nullptr};
  nn::BatchNorm2d bn_{nullptr};
};

// torchvision's SqueezeExcitation: average pool, fc1 (1x1 convolution), SiLU, fc2, sigmoid, the input scaled by it.
class SqueezeExcitation : public nn::Module {
 public:
  SqueezeExcitation(int64_t channels, int64_t squeeze) {
    fc1_ = register_module("fc1", nn::Conv2d(nn::Conv2dOptions(channels, squeeze, 1)));
    fc2_ = register_module("fc2", nn::Conv2d(nn::Conv2dOptions(squeeze, channels, 1)));
  }

  at::Tensor forward(const at::Tensor& x) {
    const at::Tensor scale = at::adaptive_avg_pool2d(x, {1, 1});
    return at::sigmoid(fc2_->forward(at::silu(fc1_->forward(scale)))) * x;
  }

 private:
  nn::Conv2d fc1_{nullptr}, fc2_{nullptr};
};

// One row of torchvision's B0 table: expansion, kernel, stride of the first block, channels in and out, blocks.
struct StageConfig {
  int64_t expand, kernel, stride, in, out;
  int blocks;
};

// torchvision's MBConv: 1x1 expansion (when expand > 1), depthwise kxk with the stride, squeeze-and-excitation (to a
// quarter of the block's input channels), 1x1 projection; stochastic depth and the residual when the shape is kept.
class MBConv : public nn::Module {
 public:
  MBConv(int64_t expand, int64_t kernel, int64_t stride, int64_t in, int64_t out, double stochastic_depth,
         const ModelOptions& options)
      : residual_(stride == 1 && in == out), stochastic_depth_(stochastic_depth) {
    const int64_t expanded = in * expand;
    auto block = register_module("block", std::make_shared<nn::Module>("Sequential"));
    int index = 0;
    if (expanded != in) {
      layers_.push_back(block->register_module(std::to_string(index++),
                                               std::make_shared<ConvNormAct>(in, expanded, 1, 1, 1, true, options)));
    }
    layers_.push_back(block->register_module(
        std::to_string(index++),
        std::make_shared<ConvNormAct>(expanded, expanded, kernel, stride, expanded, true, options)));
    se_ = block->register_module(std::to_string(index++),
                                 std::make_shared<SqueezeExcitation>(expanded, std::max<int64_t>(1, in / 4)));
    project_ = block->register_module(std::to_string(index++),
                                      std::make_shared<ConvNormAct>(expanded, out, 1, 1, 1, false, options));
  }

  at::Tensor forward(const at::Tensor& input) {
    at::Tensor x = input;
    for (const auto& layer : layers_) x = layer->forward(x);
    x = project_->forward(se_->forward(x));
    if (!residual_) return x;
    return stochastic_depth(x, stochastic_depth_, is_training()).add_(input);
  }

 private:
  bool residual_;
  double stochastic_depth_;
  std::vector<std::shared_ptr<ConvNormAct>> layers_;  // the expansion (where there is one) and the depthwise
  std::shared_ptr<SqueezeExcitation> se_;
  std::shared_ptr<ConvNormAct> project_;
};

class EfficientNet final : public Classifier {
 public:
  EfficientNet(const std::vector<StageConfig>& stages, const ModelOptions& options)
      : options_(options), dropout_(probability_or_default(options.dropout, kDropout, "dropout")) {
    const double sd = probability_or_default(options.stochastic_depth, kStochasticDepth, "stochastic_depth");
    auto features = register_module("features", std::make_shared<nn::Module>("Sequential"));
    stem_ = features->register_module("0", std::make_shared<ConvNormAct>(3, stages.front().in, 3, 2, 1, true, options));
    int total = 0;
    for (const auto& s : stages) total += s.blocks;
    int index = 0;  // the block's index over all stages: its stochastic depth rises linearly with it
    for (size_t s = 0; s < stages.size(); ++s) {
      const StageConfig& c = stages[s];
      auto stage = features->register_module(std::to_string(s + 1), std::make_shared<nn::Module>("Sequential"));
      for (int b = 0; b < c.blocks; ++b, ++index) {
        blocks_.push_back(stage->register_module(
            std::to_string(b), std::make_shared<MBConv>(c.expand, c.kernel, b == 0 ? c.stride : 1,
                                                        b == 0 ? c.in : c.out, c.out, sd * index / total, options)));
      }
    }
    head_conv_ = features->register_module(
        std::to_string(stages.size() + 1),
        std::make_shared<ConvNormAct>(stages.back().out, kLastChannels, 1, 1, 1, true, options));
    // classifier: Dropout at 0, the Linear at 1.
    auto classifier = register_module("classifier", std::make_shared<nn::Module>("Sequential"));
    fc_ = classifier->register_module("1", nn::Linear(kLastChannels, options.num_classes));
    initialise();
  }

  at::Tensor forward(const at::Tensor& images) override {
    at::Tensor x = stem_->forward(images);
    for (const auto& block : blocks_) x = block->forward(x);
    x = at::adaptive_avg_pool2d(head_conv_->forward(x), {1, 1}).flatten(1);
    if (dropout_ > 0 && is_training()) x = at::dropout(x, dropout_, true);
    return fc_->forward(x);
  }

  std::string classifier_name() const override { return "classifier.1"; }

  // fusion: bn: the projections' BatchNorms (no activation) on the fused BatchNorm op; BatchNorm+SiLU not yet.
  std::string describe_fusion(const at::Tensor& example) const override {
    if (options_.fusion == Fusion::kOff) return "off: ATen's separate BatchNorm, SiLU and add kernels";
    const at::Tensor x = at::empty({2, 16, 4, 4}, example.options())
                             .contiguous(example.is_contiguous(at::MemoryFormat::ChannelsLast) && example.dim() == 4
                                             ? at::MemoryFormat::ChannelsLast
                                             : at::MemoryFormat::Contiguous);
    const std::string conv = options_.fusion == Fusion::kConv ? "conv: no bottlenecks to fuse, as bn; " : "";
    const std::string why_not = ops::fused_unsupported_reason(x);
    if (!why_not.empty()) {
      log_warn("fusion: " + std::string(options_.fusion == Fusion::kConv ? "conv" : "bn") +
               " runs ATen's separate BatchNorm and SiLU kernels: " + why_not);
      return conv + "bn: ATen's separate ops (" + why_not + ")";
    }
    return conv + "bn (" + ops::to_string(options_.bn_kernels) + "): BatchNorm+SiLU " +
           ops::describe_kernels(x, false, ops::Activation::kSilu, options_.bn_kernels) + "; the projections' BatchNorm " +
           ops::describe_kernels(x, false, false, options_.bn_kernels) + "; squeeze-excite and the residual add: ATen's ops";
  }

 private:
  // torchvision's initialisation: convolutions Kaiming normal (fan_out) with zero bias, BatchNorm at (1, 0), the
  // classifier uniform in +-1/sqrt(classes) with zero bias.
  void initialise() {
    torch::NoGradGuard no_grad;
    for (auto& module : modules(/*include_self=*/false)) {
      if (auto* c = module->as<nn::Conv2d>()) {
        nn::init::kaiming_normal_(c->weight, 0.0, torch::kFanOut, torch::kReLU);
        if (c->bias.defined()) c->bias.zero_();
      } else if (auto* bn = module->as<nn::BatchNorm2d>()) {
        bn->weight.fill_(1.0);
        bn->bias.zero_();
      }
    }
    const double range = 1.0 / std::sqrt(static_cast<double>(options_.num_classes));
    fc_->weight.uniform_(-range, range);
    fc_->bias.zero_();
  }

  ModelOptions options_;
  double dropout_;
  std::shared_ptr<ConvNormAct> stem_;
  std::vector<std::shared_ptr<MBConv>> blocks_;
  std::shared_ptr<ConvNormAct> head_conv_;
  nn::Linear fc_{nullptr};
};

}  // namespace

std::shared_ptr<Classifier> make_efficientnet_b0(const ModelOptions& options) {
  // torchvision's table for B0 (width and depth multipliers 1: the channels are already multiples of 8).
  return std::make_shared<EfficientNet>(std::vector<StageConfig>{{1, 3, 1, 32, 16, 1},
                                                                 {6, 3, 2, 16, 24, 2},
                                                                 {6, 5, 2, 24, 40, 2},
                                                                 {6, 3, 2, 40, 80, 3},
                                                                 {6, 5, 1, 80, 112, 3},
                                                                 {6, 5, 2, 112, 192, 4},
                                                                 {6, 3, 1, 192, 320, 1}},
                                        options);
}

}  // namespace rn50::models
