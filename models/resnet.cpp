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

namespace rn50::models {
namespace {

namespace nn = torch::nn;

nn::Conv2d conv(int64_t in, int64_t out, int64_t kernel, int64_t stride) {
  return nn::Conv2d(nn::Conv2dOptions(in, out, kernel).stride(stride).padding(kernel / 2).bias(false));
}

// A residual block: torchvision's BasicBlock (two 3x3) or Bottleneck (1x1, 3x3 with the stride, 1x1).
class Block : public nn::Module {
 public:
  Block(bool bottleneck, int64_t in, int64_t width, int64_t stride) : bottleneck_(bottleneck) {
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
      downsample_ = register_module("downsample", nn::Sequential(conv(in, out, 1, stride), nn::BatchNorm2d(out)));
    }
  }

  at::Tensor forward(const at::Tensor& x) {
    at::Tensor y = bn1_->forward(conv1_->forward(x)).relu_();
    y = bn2_->forward(conv2_->forward(y));
    if (bottleneck_) y = bn3_->forward(conv3_->forward(y.relu_()));
    const at::Tensor identity = downsample_.is_empty() ? x : downsample_->forward(x);
    return y.add_(identity).relu_();
  }

  // The BatchNorm whose output joins the identity: zeroed for zero_init_residual.
  nn::BatchNorm2d last_bn() const { return bottleneck_ ? bn3_ : bn2_; }

 private:
  bool bottleneck_;
  nn::Conv2d conv1_{nullptr}, conv2_{nullptr}, conv3_{nullptr};
  nn::BatchNorm2d bn1_{nullptr}, bn2_{nullptr}, bn3_{nullptr};
  nn::Sequential downsample_{nullptr};
};

class ResNet final : public Classifier {
 public:
  ResNet(bool bottleneck, const std::array<int, 4>& blocks, const ModelOptions& options) {
    conv1_ = register_module("conv1", nn::Conv2d(nn::Conv2dOptions(3, 64, 7).stride(2).padding(3).bias(false)));
    bn1_ = register_module("bn1", nn::BatchNorm2d(64));
    int64_t in = 64;
    const int64_t widths[4] = {64, 128, 256, 512};
    for (int stage = 0; stage < 4; ++stage) {
      nn::ModuleList layer;
      for (int b = 0; b < blocks[stage]; ++b) {
        const int64_t stride = (stage > 0 && b == 0) ? 2 : 1;
        auto block = std::make_shared<Block>(bottleneck, in, widths[stage], stride);
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
    at::Tensor x = bn1_->forward(conv1_->forward(images)).relu_();
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
