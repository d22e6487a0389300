// models/convnext.cpp: ConvNeXt-Tiny with torchvision's module names (features.N.M.block.K), so that state dicts map
// one to one.
#include "models/model.h"

#include <ATen/ATen.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>
#include <torch/utils.h>

#include <array>
#include <string>
#include <vector>

#include "models/blocks.h"

namespace rn50::models {
namespace {

namespace nn = torch::nn;

constexpr double kLayerNormEps = 1e-6;
constexpr double kLayerScale = 1e-6;      // torchvision's initial layer_scale
constexpr double kStochasticDepth = 0.1;  // convnext_tiny's stochastic_depth_prob

nn::LayerNorm layer_norm(int64_t channels) {
  return nn::LayerNorm(nn::LayerNormOptions({channels}).eps(kLayerNormEps));
}

// torchvision's CNBlock: depthwise 7x7, then in NHWC LayerNorm, Linear to 4x, GELU, Linear back, then layer scale,
// stochastic depth and the residual. Its Sequential `block` holds the convolution at 0, the LayerNorm at 2 and the
// linears at 3 and 5 (1 and 6 are the permutes, 4 the GELU).
class CNBlock : public nn::Module {
 public:
  CNBlock(int64_t dim, double stochastic_depth, const ModelOptions& options)
      : stochastic_depth_(stochastic_depth), options_(options) {
    auto block = register_module("block", std::make_shared<nn::Module>("Sequential"));
    dwconv_ = block->register_module("0", nn::Conv2d(nn::Conv2dOptions(dim, dim, 7).padding(3).groups(dim)));
    norm_ = block->register_module("2", layer_norm(dim));
    fc1_ = block->register_module("3", nn::Linear(dim, 4 * dim));
    fc2_ = block->register_module("5", nn::Linear(4 * dim, dim));
    layer_scale_ = register_parameter("layer_scale", at::full({dim, 1, 1}, kLayerScale));
  }

  // With fusion on, the LayerNorm hands its output to fc1 in the compute dtype, and layer scale, stochastic depth and
  // the residual add are one pass (ops/fused_layer_norm.h); with fusion off, torchvision's ops.
  at::Tensor forward(const at::Tensor& input) {
    const at::Tensor y = dwconv_->forward(input).permute({0, 2, 3, 1});
    const at::Tensor h = add_layer_norm(y, {}, norm_, compute_dtype(y), options_).y;
    const at::Tensor branch = linear(fc2_, gelu(linear(fc1_, h), options_)).permute({0, 3, 1, 2});
    const at::Tensor scale = stochastic_depth_scale(input, stochastic_depth_, is_training());
    return ops::scaled_residual(input, branch, layer_scale_, scale, options_.fusion != Fusion::kOff);
  }

 private:
  double stochastic_depth_;
  ModelOptions options_;
  nn::Conv2d dwconv_{nullptr};
  nn::LayerNorm norm_{nullptr};
  nn::Linear fc1_{nullptr}, fc2_{nullptr};
  at::Tensor layer_scale_;
};

class ConvNeXt final : public Classifier {
 public:
  ConvNeXt(const std::array<int64_t, 4>& dims, const std::array<int, 4>& depths, const ModelOptions& options)
      : options_(options) {
    const double sd = probability_or_default(options.stochastic_depth, kStochasticDepth, "stochastic_depth");
    auto features = register_module("features", std::make_shared<nn::Module>("Sequential"));
    // features.0: torchvision's Conv2dNormActivation stem, a 4x4/4 convolution and LayerNorm2d.
    auto stem = features->register_module("0", std::make_shared<nn::Module>("Conv2dNormActivation"));
    stem_conv_ = stem->register_module("0", nn::Conv2d(nn::Conv2dOptions(3, dims[0], 4).stride(4)));
    stem_norm_ = stem->register_module("1", layer_norm(dims[0]));
    int total = 0;
    for (int d : depths) total += d;
    int index = 0;  // the block's index over all stages: its stochastic depth rises linearly with it
    int64_t feature = 1;
    for (size_t s = 0; s < dims.size(); ++s) {
      auto stage = features->register_module(std::to_string(feature++), std::make_shared<nn::Module>("Sequential"));
      std::vector<std::shared_ptr<CNBlock>> blocks;
      for (int b = 0; b < depths[s]; ++b, ++index) {
        blocks.push_back(stage->register_module(
            std::to_string(b), std::make_shared<CNBlock>(dims[s], sd * index / (total - 1.0), options)));
      }
      stages_.push_back(std::move(blocks));
      if (s + 1 < dims.size()) {  // downsampling: LayerNorm2d, then a 2x2/2 convolution
        auto down = features->register_module(std::to_string(feature++), std::make_shared<nn::Module>("Sequential"));
        down_norms_.push_back(down->register_module("0", layer_norm(dims[s])));
        down_convs_.push_back(
            down->register_module("1", nn::Conv2d(nn::Conv2dOptions(dims[s], dims[s + 1], 2).stride(2))));
      }
    }
    // classifier: LayerNorm2d at 0, Flatten at 1, the Linear at 2.
    auto classifier = register_module("classifier", std::make_shared<nn::Module>("Sequential"));
    head_norm_ = classifier->register_module("0", layer_norm(dims.back()));
    head_ = classifier->register_module("2", nn::Linear(dims.back(), options.num_classes));
    initialise();
  }

  at::Tensor forward(const at::Tensor& images) override {
    // The residual stream keeps ATen's dtypes (float32 under autocast: LayerNorm's output, and the layer scale's
    // product); LayerNorms that feed a convolution or the head hand over the compute dtype.
    at::Tensor x = stem_conv_->forward(images);
    x = layer_norm_channels(x, stem_norm_, layer_norm_dtype(x), options_);
    for (size_t s = 0; s < stages_.size(); ++s) {
      for (const auto& block : stages_[s]) x = block->forward(x);
      if (s < down_convs_.size()) {
        x = layer_norm_channels(x, down_norms_[s], compute_dtype(x), options_);
        x = down_convs_[s]->forward(x);
      }
    }
    x = at::adaptive_avg_pool2d(x, {1, 1});
    x = layer_norm_channels(x, head_norm_, compute_dtype(x), options_).flatten(1);
    return head_->forward(x);
  }

  std::string classifier_name() const override { return "classifier.2"; }
  // The 4x4 stride-4 stem and three 2x2 stride-2 downsamplings: 32 px ends at 1x1.
  int64_t min_image_size() const override { return 32; }

  std::string describe_fusion(const at::Tensor& example) const override {
    if (options_.fusion == Fusion::kOff) return "off: ATen's separate LayerNorm, GELU, layer scale and add kernels";
    // The blocks' LayerNorm: half-precision rows of 96-768 channels in, the compute dtype out.
    const at::ScalarType dtype = compute_dtype(example);
    const at::Tensor rows = at::empty({1, 96}, example.options().dtype(dtype));
    const std::string why = ops::fused_layer_norm_unsupported_reason(rows, {}, dtype);
    if (!why.empty()) return "LayerNorm and layer scale + stochastic depth + add: ATen's ops (" + why + ")";
    return "LayerNorm (to the compute dtype) and layer scale + stochastic depth + add: rn50's row kernels; GELU "
           "and the depthwise 7x7 convolutions ATen's";
  }

 private:
  // torchvision's initialisation: every convolution and linear truncated normal (std 0.02) with zero bias,
  // LayerNorm at (1, 0), layer_scale at 1e-6.
  void initialise() {
    torch::NoGradGuard no_grad;
    for (auto& module : modules(/*include_self=*/false)) {
      if (auto* c = module->as<nn::Conv2d>()) {
        trunc_normal_(c->weight, 0.02);
        c->bias.zero_();
      } else if (auto* l = module->as<nn::Linear>()) {
        trunc_normal_(l->weight, 0.02);
        l->bias.zero_();
      }
    }
  }

  ModelOptions options_;
  nn::Conv2d stem_conv_{nullptr};
  nn::LayerNorm stem_norm_{nullptr};
  std::vector<std::vector<std::shared_ptr<CNBlock>>> stages_;
  std::vector<nn::LayerNorm> down_norms_;
  std::vector<nn::Conv2d> down_convs_;
  nn::LayerNorm head_norm_{nullptr};
  nn::Linear head_{nullptr};
};

}  // namespace

std::shared_ptr<Classifier> make_convnext_tiny(const ModelOptions& options) {
  return std::make_shared<ConvNeXt>(std::array<int64_t, 4>{96, 192, 384, 768}, std::array<int, 4>{3, 3, 9, 3}, options);
}

}  // namespace rn50::models
