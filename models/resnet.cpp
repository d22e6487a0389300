// models/resnet.cpp: ResNet v1.5 with torchvision's module names, so that state dicts map one to one.
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

#include <stdexcept>

#include "ops/fused_batch_norm.h"

namespace rn50::models {
namespace {

namespace nn = torch::nn;

nn::Conv2d conv(int64_t in, int64_t out, int64_t kernel, int64_t stride) {
  return nn::Conv2d(nn::Conv2dOptions(in, out, kernel).stride(stride).padding(kernel / 2).bias(false));
}

// How a model runs its BatchNorms: ATen's separate ops, or the fused op with these kernels.
struct BnMode {
  bool fused = false;
  ops::BnKernels kernels = ops::BnKernels::kAuto;
};

BnMode bn_mode(const ModelOptions& options) {
  return {options.fusion == Fusion::kBatchNorm, ops::bn_kernels_for(options.fusion_kernels)};
}

// relu?(bn(x) + residual?): ATen's separate ops, as torchvision runs them, or one fused op.
at::Tensor bn_act(nn::BatchNorm2d bn, const at::Tensor& x, const at::Tensor& residual, bool relu, BnMode mode) {
  if (!mode.fused) {
    at::Tensor y = bn->forward(x);
    if (residual.defined()) y.add_(residual);
    return relu ? y.relu_() : y;
  }
  ops::BatchNormState state;
  state.weight = bn->weight;
  state.bias = bn->bias;
  state.running_mean = bn->running_mean;
  state.running_var = bn->running_var;
  state.num_batches_tracked = bn->num_batches_tracked;
  state.momentum = bn->options.momentum().value_or(0.1);
  state.eps = bn->options.eps();
  state.training = bn->is_training();
  return ops::batch_norm_act(x, state, residual, relu, mode.kernels);
}

// A residual block: torchvision's BasicBlock (two 3x3) or Bottleneck (1x1, 3x3 with the stride, 1x1).
class Block : public nn::Module {
 public:
  Block(bool bottleneck, int64_t in, int64_t width, int64_t stride, BnMode mode)
      : bottleneck_(bottleneck), mode_(mode) {
    const int64_t expansion = bottleneck ? 4 : 1;
    const int64_t out = width * expansion;
    if (bottleneck) {
      conv1_ = register_module("conv1", conv(in, width, 1, 1));
      bn1_ = register_module("bn1", nn::BatchNorm2d(width));
      conv2_ = register_module("conv2", conv(width, width, 3, stride));
      bn2_ = register_module("bn2", nn::BatchNorm2d(width));
      conv3_ = register_module("conv3", conv(width, out, 1, 1));
      bn3_ = register_module("bn3", nn::BatchNorm2d(out));
    } else {
      conv1_ = register_module("conv1", conv(in, width, 3, stride));
      bn1_ = register_module("bn1", nn::BatchNorm2d(width));
      conv2_ = register_module("conv2", conv(width, width, 3, 1));
      bn2_ = register_module("bn2", nn::BatchNorm2d(width));
    }
    if (stride != 1 || in != out) {
      downsample_conv_ = conv(in, out, 1, stride);
      downsample_bn_ = nn::BatchNorm2d(out);
      downsample_ = register_module("downsample", nn::Sequential(downsample_conv_, downsample_bn_));
    }
  }

  at::Tensor forward(const at::Tensor& x) {
    at::Tensor y = bn_act(bn1_, conv1_->forward(x), {}, true, mode_);
    if (bottleneck_) y = bn_act(bn2_, conv2_->forward(y), {}, true, mode_);
    const at::Tensor last = (bottleneck_ ? conv3_ : conv2_)->forward(y);
    const at::Tensor identity =
        downsample_.is_empty() ? x : bn_act(downsample_bn_, downsample_conv_->forward(x), {}, false, mode_);
    return bn_act(last_bn(), last, identity, true, mode_);
  }

  // The BatchNorm whose output joins the identity: zeroed for zero_init_residual.
  nn::BatchNorm2d last_bn() const { return bottleneck_ ? bn3_ : bn2_; }

 private:
  bool bottleneck_;
  BnMode mode_;
  nn::Conv2d conv1_{nullptr}, conv2_{nullptr}, conv3_{nullptr};
  nn::BatchNorm2d bn1_{nullptr}, bn2_{nullptr}, bn3_{nullptr};
  nn::Sequential downsample_{nullptr};  // downsample_conv_ then downsample_bn_, under torchvision's names 0 and 1
  nn::Conv2d downsample_conv_{nullptr};
  nn::BatchNorm2d downsample_bn_{nullptr};
};

class ResNet final : public Classifier {
 public:
  ResNet(bool bottleneck, const std::array<int, 4>& blocks, const ModelOptions& options) : mode_(bn_mode(options)) {
    conv1_ = register_module("conv1", nn::Conv2d(nn::Conv2dOptions(3, 64, 7).stride(2).padding(3).bias(false)));
    bn1_ = register_module("bn1", nn::BatchNorm2d(64));
    int64_t in = 64;
    const int64_t widths[4] = {64, 128, 256, 512};
    for (int stage = 0; stage < 4; ++stage) {
      nn::ModuleList layer;
      for (int b = 0; b < blocks[stage]; ++b) {
        const int64_t stride = (stage > 0 && b == 0) ? 2 : 1;
        auto block = std::make_shared<Block>(bottleneck, in, widths[stage], stride, mode_);
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
    at::Tensor x = bn_act(bn1_, conv1_->forward(images), {}, true, mode_);
    x = torch::nn::functional::max_pool2d(x, torch::nn::functional::MaxPool2dFuncOptions(3).stride(2).padding(1));
    for (const auto& block : blocks_) x = block->forward(x);
    x = x.mean({2, 3});  // global average pool; keeps the batch dimension
    return fc_->forward(x);
  }

  std::string classifier_name() const override { return "fc"; }

 private:
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

  BnMode mode_;
  nn::Conv2d conv1_{nullptr};
  nn::BatchNorm2d bn1_{nullptr};
  std::vector<std::shared_ptr<Block>> blocks_;
  nn::Linear fc_{nullptr};
};

}  // namespace

std::shared_ptr<Classifier> make_resnet(int depth, const ModelOptions& options) {
  switch (depth) {
    case 18:
      return std::make_shared<ResNet>(false, std::array<int, 4>{2, 2, 2, 2}, options);
    case 34:
      return std::make_shared<ResNet>(false, std::array<int, 4>{3, 4, 6, 3}, options);
    case 50:
      return std::make_shared<ResNet>(true, std::array<int, 4>{3, 4, 6, 3}, options);
    case 101:
      return std::make_shared<ResNet>(true, std::array<int, 4>{3, 4, 23, 3}, options);
    case 152:
      return std::make_shared<ResNet>(true, std::array<int, 4>{3, 8, 36, 3}, options);
    default:
      throw std::invalid_argument("no ResNet of depth " + std::to_string(depth));
  }
}

}  // namespace rn50::models
