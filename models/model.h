// models/model.h: the image-classifier interface and the registry that builds a model by name.
#pragma once

#include <torch/nn/module.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ops/bn_kernels.h"
#include "ops/conv_prologue.h"

namespace rn50::models {

// What the model fuses (the key fusion). kOff: ATen's separate ops, as torchvision runs them; kBatchNorm: each
// BatchNorm with its ReLU and residual add in one fused op (ops/fused_batch_norm.h); kConv: that, and each ResNet
// bottleneck in training as one op on fused convolutions (ops/fused_bottleneck.h). The modules, parameters and
// buffers are the same every way.
enum class Fusion { kOff, kBatchNorm, kConv };

// Any model rn50 trains: NCHW (or channels-last) float images in, logits out.
class Classifier : public torch::nn::Module {
 public:
  virtual at::Tensor forward(const at::Tensor& images) = 0;
  // The name of the final classification layer ("fc" in torchvision's ResNets): fine-tuning from
  // weights with another class count starts everything but this layer from them.
  virtual std::string classifier_name() const = 0;
  // The start-up table's line on what the model fuses for inputs like `example` (its device, dtype and layout), and
  // a warning for each fused path that falls back.
  virtual std::string describe_fusion(const at::Tensor& example) const = 0;
  // Parameters (by name) that get no weight decay besides every 1-D one (norms' weights and biases): a vision
  // transformer's position embedding and class token, as timm and torchvision's recipes exclude them.
  virtual std::vector<std::string> no_weight_decay() const { return {}; }
  // The one square image size the model takes (vit_b_16: 224, its position embedding's), 0 for any size: a training
  // run refuses another image_size before it starts.
  virtual int64_t fixed_image_size() const { return 0; }
  // The smallest square image size the model's downsampling leaves a feature map for (0: image_size's own range
  // suffices): a training run refuses a smaller one before it starts, not at its first forward pass.
  virtual int64_t min_image_size() const { return 0; }
};

struct ModelOptions {
  int64_t num_classes = 1000;
  bool zero_init_residual = true;  // last BatchNorm of each residual block starts at zero
  Fusion fusion = Fusion::kOff;
  ops::BnKernels bn_kernels = ops::BnKernels::kAuto;  // the fused BatchNorm's kernels, when fusion is on
  bool wgrad_stream = true;  // kConv: the bottlenecks' weight gradients on a second stream (ops/side_stream.h)
  ops::PrologueRun conv_prologue = ops::PrologueRun::kTimed;  // kConv: where the prologues run (ops/conv_prologue.h)
  int64_t stem_channels = 3;  // ResNets: the stem convolution's input channels, zero-padded past 3 (models/stem.h)
  bool batched_casts = false;  // kConv: the bottlenecks' float16 weights cast in one launch each way (weight_cast.h)
  bool fuse_stem_pool = false;  // kBatchNorm, kConv: ResNets' stem BatchNorm+ReLU+max-pool as one op (ops/max_pool.h)
  // Regularisation in training, where the model has it (< 0: torchvision's default for the model): stochastic depth
  // as torchvision's stochastic_depth_prob (the residual branches' drop probability rises linearly with depth to about
  // it: ConvNeXt's deepest block gets it, EfficientNet's block k of n gets it * k / n), and torchvision's dropout
  // (EfficientNet: before the classifier; ViT: everywhere torchvision applies it).
  double stochastic_depth = -1;
  double dropout = -1;
};

// Builds a registered model. Throws rn50::ConfigError naming the model when it is unknown.
std::shared_ptr<Classifier> create(const std::string& name, const ModelOptions& options);

// Whether the named model's stem takes stem_channels (the ResNets); the others ignore the option.
bool takes_stem_channels(const std::string& name);

// Whether wgrad_stream acts in the named model: fusion: conv's fused bottlenecks run their weight gradients on a second
// stream (ResNet-50, -101 and -152; ResNeXt's grouped bottlenecks and the basic blocks run as fusion: bn).
bool has_weight_gradient_stream(const std::string& name);

// What fusion: conv's timed plan choices depend on besides their GPU, pattern and shape (this rn50's build, the cuDNN
// library loaded, the CUDA driver; "" in a CPU-only build): the plan cache's context (core/plan_cache.h).
std::string fusion_plan_context();

// The image channels a training input of the named model is given: its stem_channels where it takes them, else 3.
// Every model's forward takes 3-channel images; one with stem_channels > 3 also takes that many without copying them
// (the channels past 3 meet zero weights, so they must be finite; the sources write zeros there).
int64_t input_channels(const std::string& name, int64_t stem_channels);

// The registered names, in registry order.
std::vector<std::string> names();

// Puts every 4-D parameter in channels-last memory (nn::Module::to has no memory-format overload in LibTorch);
// gradients follow their parameters' layout.
void to_channels_last(torch::nn::Module& model);

}  // namespace rn50::models
