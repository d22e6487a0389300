// models/registry.cpp: the table of trainable models. Porting a model: one new file and one line here.
#include <functional>
#include <utility>

#include "core/errors.h"
#include "models/convnext.h"
#include "models/efficientnet.h"
#include "models/model.h"
#include "models/resnet.h"
#include "models/vit.h"

namespace rn50::models {
namespace {

using Factory = std::function<std::shared_ptr<Classifier>(const ModelOptions&)>;

const std::vector<std::pair<std::string, Factory>>& registry() {
  static const std::vector<std::pair<std::string, Factory>> table = {
      {"resnet18", [](const ModelOptions& o) { return make_resnet(18, o); }},
      {"resnet34", [](const ModelOptions& o) { return make_resnet(34, o); }},
      {"resnet50", [](const ModelOptions& o) { return make_resnet(50, o); }},
      {"resnet101", [](const ModelOptions& o) { return make_resnet(101, o); }},
      {"resnet152", [](const ModelOptions& o) { return make_resnet(152, o); }},
      {"resnext50_32x4d", [](const ModelOptions& o) { return make_resnet(50, o, 32, 4); }},
      {"convnext_tiny", make_convnext_tiny},
      {"vit_b_16", make_vit_b_16},
      {"efficientnet_b0", make_efficientnet_b0},
  };
  return table;
}

}  // namespace

std::shared_ptr<Classifier> create(const std::string& name, const ModelOptions& options) {
  for (const auto& [entry, factory] : registry()) {
    if (entry == name) return factory(options);
  }
  std::string known;
  for (const auto& n : names()) known += (known.empty() ? "" : ", ") + n;
  throw ConfigError("config key 'model': unknown model '" + name + "' (known: " + known + ")");
}

std::vector<std::string> names() {
  std::vector<std::string> out;
  for (const auto& entry : registry()) out.push_back(entry.first);
  return out;
}

}  // namespace rn50::models
