// models/alexnet.cpp: AlexNet (torchvision's alexnet: layout, parameter names, initialisation), the port that
// docs/porting.md walks through: five convolutions and three linears, no normalisation, dropout 0.5.
#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/dropout.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/pooling.h>

#include <memory>
#include <string>

#include "models/blocks.h"
#include "models/model.h"

namespace rn50::models {
namespace {

namespace nn = torch::nn;

class AlexNet final : public Classifier {
 public:
  explicit AlexNet(const ModelOptions& options) {
    const double dropout = probability_or_default(options.dropout, 0.5, "dropout");
    // The indices of torchvision's nn.Sequential, ReLU and pooling included: they name the parameters.
    features_ =
        register_module("features", nn::Sequential(nn::Conv2d(nn::Conv2dOptions(3, 64, 11).stride(4).padding(2)),
                                                   nn::ReLU(), nn::MaxPool2d(nn::MaxPool2dOptions(3).stride(2)),
                                                   nn::Conv2d(nn::Conv2dOptions(64, 192, 5).padding(2)), nn::ReLU(),
                                                   nn::MaxPool2d(nn::MaxPool2dOptions(3).stride(2)),
                                                   nn::Conv2d(nn::Conv2dOptions(192, 384, 3).padding(1)), nn::ReLU(),
                                                   nn::Conv2d(nn::Conv2dOptions(384, 256, 3).padding(1)), nn::ReLU(),
                                                   nn::Conv2d(nn::Conv2dOptions(256, 256, 3).padding(1)), nn::ReLU(),
                                                   nn::MaxPool2d(nn::MaxPool2dOptions(3).stride(2))));
    pool_ = register_module("avgpool", nn::AdaptiveAvgPool2d(nn::AdaptiveAvgPool2dOptions({6, 6})));
    classifier_ = register_module("classifier", nn::Sequential(nn::Dropout(dropout), nn::Linear(256 * 6 * 6, 4096),
                                                               nn::ReLU(), nn::Dropout(dropout), nn::Linear(4096, 4096),
                                                               nn::ReLU(), nn::Linear(4096, options.num_classes)));
    // torchvision keeps PyTorch's default initialisation here, which LibTorch's modules share.
  }

  at::Tensor forward(const at::Tensor& images) override {
    return classifier_->forward(pool_->forward(features_->forward(images)).flatten(1));
  }

  std::string classifier_name() const override { return "classifier.6"; }
  // The 11x11 stride-4 convolution and three 3x3 stride-2 max-pools: 62 px leaves the last pool nothing.
  int64_t min_image_size() const override { return 63; }

  std::string describe_fusion(const at::Tensor&) const override {
    return "none: AlexNet has no normalisation to fuse (ATen's convolutions, ReLU and pooling)";
  }

 private:
  nn::Sequential features_{nullptr}, classifier_{nullptr};
  nn::AdaptiveAvgPool2d pool_{nullptr};
};

}  // namespace

std::shared_ptr<Classifier> make_alexnet(const ModelOptions& options) { return std::make_shared<AlexNet>(options); }

}  // namespace rn50::models
