// models/vit.cpp: ViT-B/16 with torchvision's module names (encoder.layers.encoder_layer_K, self_attention's packed
// in_proj), so that state dicts map one to one; attention on ATen's scaled_dot_product_attention.
#include "models/model.h"

#include <ATen/ATen.h>
#include <torch/nn/init.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>
#include <torch/utils.h>

#include <cmath>
#include <string>
#include <vector>

#include "core/errors.h"
#include "core/torch_compat.h"
#include "models/blocks.h"

namespace rn50::models {
namespace {

namespace nn = torch::nn;

constexpr int64_t kImageSize = 224, kPatch = 16, kLayers = 12, kHeads = 12, kWidth = 768, kMlp = 3072;
constexpr int64_t kTokens = (kImageSize / kPatch) * (kImageSize / kPatch) + 1;  // 197: the patches and the class token
constexpr double kLayerNormEps = 1e-6;

nn::LayerNorm layer_norm(int64_t width) { return nn::LayerNorm(nn::LayerNormOptions({width}).eps(kLayerNormEps)); }

at::Tensor maybe_dropout(const at::Tensor& x, double p, bool training) {
  return p > 0 && training ? at::dropout(x, p, true) : x;
}

// torch.nn.MultiheadAttention's parameters (in_proj_weight [3W, W] holding q, k and v, in_proj_bias, out_proj), for
// self-attention over [batch, tokens, W] with no mask.
class SelfAttention : public nn::Module {
 public:
  SelfAttention(int64_t width, int64_t heads) : heads_(heads) {
    in_proj_weight_ = register_parameter("in_proj_weight", at::empty({3 * width, width}));
    in_proj_bias_ = register_parameter("in_proj_bias", at::zeros({3 * width}));
    out_proj_ = register_module("out_proj", nn::Linear(width, width));
    nn::init::xavier_uniform_(in_proj_weight_);
    torch::NoGradGuard no_grad;
    out_proj_->bias.zero_();
  }

  at::Tensor forward(const at::Tensor& x) {
    const int64_t batch = x.size(0), tokens = x.size(1), width = x.size(2);
    // One matmul for q, k and v; each is a [batch, heads, tokens, head_dim] view of its result. unbind's backward
    // stacks the three gradients into the matmul's layout in one copy (indexing would zero-fill and add per view).
    const std::vector<at::Tensor> qkv =
        at::linear(x, in_proj_weight_, in_proj_bias_).view({batch, tokens, 3, heads_, width / heads_}).unbind(2);
    const at::Tensor y = compat::scaled_dot_product_attention(qkv[0].transpose(1, 2), qkv[1].transpose(1, 2),
                                                              qkv[2].transpose(1, 2));
    return linear(out_proj_, y.transpose(1, 2).reshape({batch, tokens, width}));
  }

 private:
  int64_t heads_;
  at::Tensor in_proj_weight_, in_proj_bias_;
  nn::Linear out_proj_{nullptr};
};

// torchvision's EncoderBlock: x + attention(ln_1(x)), then that + mlp(ln_2(...)); mlp is Linear (0), GELU,
// Dropout, Linear (3), Dropout. The forward takes the residual stream with the previous block's MLP output not yet
// added (`pending`), so that each add fuses with the LayerNorm after it (ops/fused_layer_norm.h); it returns the
// stream and its own MLP output, pending in turn.
class EncoderBlock : public nn::Module {
 public:
  EncoderBlock(double dropout, const ModelOptions& options) : dropout_(dropout), options_(options) {
    ln_1_ = register_module("ln_1", layer_norm(kWidth));
    attention_ = register_module("self_attention", std::make_shared<SelfAttention>(kWidth, kHeads));
    ln_2_ = register_module("ln_2", layer_norm(kWidth));
    auto mlp = register_module("mlp", std::make_shared<nn::Module>("MLPBlock"));
    fc1_ = mlp->register_module("0", nn::Linear(kWidth, kMlp));
    fc2_ = mlp->register_module("3", nn::Linear(kMlp, kWidth));
    // MLPBlock's initialisation: Xavier uniform weights, biases normal with std 1e-6.
    torch::NoGradGuard no_grad;
    for (const auto& fc : {fc1_, fc2_}) {
      nn::init::xavier_uniform_(fc->weight);
      fc->bias.normal_(0.0, 1e-6);
    }
  }

  struct Stream {
    at::Tensor x;        // the residual stream
    at::Tensor pending;  // a branch output not yet added to it (undefined: none)
  };

  Stream forward(const Stream& in) {
    const bool training = is_training();
    ops::AddLayerNormOut a = add_layer_norm(in.x, in.pending, ln_1_, compute_dtype(in.x), options_);
    const at::Tensor x = in.pending.defined() ? a.sum : in.x;
    const at::Tensor attention = maybe_dropout(attention_->forward(a.y), dropout_, training);
    ops::AddLayerNormOut b = add_layer_norm(x, attention, ln_2_, compute_dtype(x), options_);
    at::Tensor y = maybe_dropout(gelu(linear(fc1_, b.y), options_), dropout_, training);
    return {b.sum, maybe_dropout(linear(fc2_, y), dropout_, training)};
  }

 private:
  double dropout_;
  ModelOptions options_;
  nn::LayerNorm ln_1_{nullptr}, ln_2_{nullptr};
  std::shared_ptr<SelfAttention> attention_;
  nn::Linear fc1_{nullptr}, fc2_{nullptr};
};

class VisionTransformer final : public Classifier {
 public:
  explicit VisionTransformer(const ModelOptions& options)
      : options_(options), dropout_(probability_or_default(options.dropout, 0.0, "dropout")) {
    conv_proj_ = register_module("conv_proj", nn::Conv2d(nn::Conv2dOptions(3, kWidth, kPatch).stride(kPatch)));
    class_token_ = register_parameter("class_token", at::zeros({1, 1, kWidth}));
    auto encoder = register_module("encoder", std::make_shared<nn::Module>("Encoder"));
    pos_embedding_ = encoder->register_parameter("pos_embedding", at::empty({1, kTokens, kWidth}));
    auto layers = encoder->register_module("layers", std::make_shared<nn::Module>("Sequential"));
    for (int64_t i = 0; i < kLayers; ++i) {
      layers_.push_back(layers->register_module("encoder_layer_" + std::to_string(i),
                                                std::make_shared<EncoderBlock>(dropout_, options)));
    }
    ln_ = encoder->register_module("ln", layer_norm(kWidth));
    auto heads = register_module("heads", std::make_shared<nn::Module>("Sequential"));
    head_ = heads->register_module("head", nn::Linear(kWidth, options.num_classes));
    initialise();
  }

  at::Tensor forward(const at::Tensor& images) override {
    if (images.dim() != 4 || images.size(2) != kImageSize || images.size(3) != kImageSize) {
      throw ConfigError("config key 'image_size': vit_b_16 takes " + std::to_string(kImageSize) + "x" +
                        std::to_string(kImageSize) + " images (its position embedding holds " +
                        std::to_string(kTokens) + " tokens), not " + c10::str(images.sizes()));
    }
    const int64_t batch = images.size(0);
    // [batch, W, 14, 14] -> [batch, 196, W]: the patches as tokens, the class token in front.
    at::Tensor x = conv_proj_->forward(images).reshape({batch, kWidth, kTokens - 1}).permute({0, 2, 1});
    x = at::cat({class_token_.expand({batch, -1, -1}), x}, 1);
    EncoderBlock::Stream stream{maybe_dropout(x + pos_embedding_, dropout_, is_training()), {}};
    for (const auto& layer : layers_) stream = layer->forward(stream);
    x = add_layer_norm(stream.x, stream.pending, ln_, compute_dtype(stream.x), options_).y;
    return head_->forward(x.select(1, 0));
  }

  std::string classifier_name() const override { return "heads.head"; }

  std::vector<std::string> no_weight_decay() const override { return {"class_token", "encoder.pos_embedding"}; }

  int64_t fixed_image_size() const override { return kImageSize; }

  std::string describe_fusion(const at::Tensor& example) const override {
    const std::string attention = "attention: ATen's scaled_dot_product_attention";
    if (options_.fusion == Fusion::kOff) return "off: ATen's separate add, LayerNorm and GELU kernels; " + attention;
    // The residual stream is float32 under autocast (the class token and position embedding promote it), each branch
    // in the compute dtype.
    const at::ScalarType dtype = compute_dtype(example);
    const at::ScalarType stream_dtype = dtype == at::kHalf || dtype == at::kBFloat16 ? at::kFloat : dtype;
    const at::Tensor stream = at::empty({1, kWidth}, example.options().dtype(stream_dtype));
    const std::string why =
        ops::fused_layer_norm_unsupported_reason(stream, at::empty({1, kWidth}, example.options().dtype(dtype)), dtype);
    if (!why.empty()) return "residual add + LayerNorm: ATen's ops (" + why + "); " + attention;
    return "residual add + LayerNorm (to the compute dtype): rn50's row kernels; GELU ATen's; " + attention;
  }

 private:
  // torchvision's initialisation: the patch projection truncated normal with std sqrt(1 / fan_in) and zero bias,
  // the position embedding normal with std 0.02, the class token and the head at zero (the encoder layers
  // initialise themselves, LayerNorm at (1, 0)).
  void initialise() {
    torch::NoGradGuard no_grad;
    trunc_normal_(conv_proj_->weight, std::sqrt(1.0 / (3 * kPatch * kPatch)));
    conv_proj_->bias.zero_();
    pos_embedding_.normal_(0.0, 0.02);
    head_->weight.zero_();
    head_->bias.zero_();
  }

  ModelOptions options_;
  double dropout_;
  nn::Conv2d conv_proj_{nullptr};
  at::Tensor class_token_, pos_embedding_;
  std::vector<std::shared_ptr<EncoderBlock>> layers_;
  nn::LayerNorm ln_{nullptr};
  nn::Linear head_{nullptr};
};

}  // namespace

std::shared_ptr<Classifier> make_vit_b_16(const ModelOptions& options) {
  return std::make_shared<VisionTransformer>(options);
}

}  // namespace rn50::models
