// models/registry.cpp: the table of trainable models. Porting a model: its file, and here its factory's declaration and
// one table line (the rest of the checklist, tests and docs, is in docs/porting.md).
#include <algorithm>
#include <functional>
#include <utility>

#include "core/errors.h"
#include "models/model.h"
#include "models/resnet.h"

namespace rn50::models {

// The factories of the models in a file of their own (models/<name>.cpp), declared here, where they are listed.
// Stages of 3, 3, 9 and 3 blocks at 96, 192, 384 and 768 channels; stochastic depth 0.1 at the deepest block
// (options.stochastic_depth, as torchvision's stochastic_depth_prob), rising linearly from 0 at the first.
std::shared_ptr<Classifier> make_convnext_tiny(const ModelOptions& options);
// 16x16 patches of 224x224 images (196 tokens and the class token), 12 encoder layers of width 768 with 12 heads
// and an MLP of 3072; dropout 0 (options.dropout: torchvision's `dropout`, everywhere it applies it). Other image
// sizes are refused: the position embedding holds 197 tokens.
std::shared_ptr<Classifier> make_vit_b_16(const ModelOptions& options);
// The stem, 16 MBConv blocks in 7 stages, the 1x1 convolution to 1280 channels and the classifier; stochastic depth
// 0.2 (options.stochastic_depth, as torchvision's stochastic_depth_prob: block k of 16 drops its branch with
// probability 0.2 * k / 16) and dropout 0.2 before the classifier (options.dropout).
std::shared_ptr<Classifier> make_efficientnet_b0(const ModelOptions& options);
// Five convolutions and three linears; dropout 0.5 (options.dropout) before the first two linears.
std::shared_ptr<Classifier> make_alexnet(const ModelOptions& options);

namespace {

using Factory = std::function<std::shared_ptr<Classifier>(const ModelOptions&)>;

struct Entry {
  std::string name;
  Factory factory;
  bool stem_channels = false;  // the stem takes ModelOptions::stem_channels (models/stem.h)
  bool wgrad_stream = false;   // fusion: conv's fused bottlenecks: ModelOptions::wgrad_stream acts
};

const std::vector<Entry>& registry() {
  static const std::vector<Entry> table = {
      {"resnet18", [](const ModelOptions& o) { return make_resnet(18, o); }, true},
      {"resnet34", [](const ModelOptions& o) { return make_resnet(34, o); }, true},
      {"resnet50", [](const ModelOptions& o) { return make_resnet(50, o); }, true, true},
      {"resnet101", [](const ModelOptions& o) { return make_resnet(101, o); }, true, true},
      {"resnet152", [](const ModelOptions& o) { return make_resnet(152, o); }, true, true},
      {"resnext50_32x4d", [](const ModelOptions& o) { return make_resnet(50, o, 32, 4); }, true},
      {"convnext_tiny", make_convnext_tiny},
      {"vit_b_16", make_vit_b_16},
      {"efficientnet_b0", make_efficientnet_b0},
      {"alexnet", make_alexnet},
  };
  return table;
}

const Entry& find(const std::string& name) {
  for (const Entry& entry : registry()) {
    if (entry.name == name) return entry;
  }
  std::string known;
  for (const auto& n : names()) known += (known.empty() ? "" : ", ") + n;
  throw ConfigError("config key 'model': unknown model '" + name + "' (known: " + known + ")");
}

}  // namespace

std::shared_ptr<Classifier> create(const std::string& name, const ModelOptions& options) {
  return find(name).factory(options);
}

bool takes_stem_channels(const std::string& name) { return find(name).stem_channels; }

bool has_weight_gradient_stream(const std::string& name) { return find(name).wgrad_stream; }

int64_t input_channels(const std::string& name, int64_t stem_channels) {
  return takes_stem_channels(name) ? std::max<int64_t>(3, stem_channels) : 3;
}

std::vector<std::string> names() {
  std::vector<std::string> out;
  for (const auto& entry : registry()) out.push_back(entry.name);
  return out;
}

}  // namespace rn50::models
