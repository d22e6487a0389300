// tests/models/test_registry.cpp: every registered model against torchvision's state dict (names, dtypes, shapes in
// order, parameter count), the registry's names against the fixtures and the docs, its error for an unknown one, the
// configs/ that name them.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "core/config.h"
#include "core/errors.h"
#include "models/model.h"
#include "tests/support/model_checks.h"

namespace rn50::models {
namespace {

struct Entry {
  std::string name, dtype, shape;
};

// tests/fixtures/torchvision_<arch>.txt was written by tests/tools/dump_torchvision_names.py from torchvision 0.14.
std::vector<Entry> torchvision_layout(const std::string& arch, int64_t* params) {
  std::ifstream in(std::string(RN50_FIXTURES) + "/torchvision_" + arch + ".txt");
  EXPECT_TRUE(in.good()) << "no fixture for " << arch << ": run tests/tools/dump_torchvision_names.py";
  std::string line;
  std::getline(in, line);
  *params = std::stoll(line.substr(line.find(": ") + 2));
  std::vector<Entry> out;
  while (std::getline(in, line)) {
    std::istringstream is(line);
    Entry e;
    is >> e.name >> e.dtype >> e.shape;
    out.push_back(e);
  }
  return out;
}

std::string shape_of(const at::Tensor& t) {
  if (t.dim() == 0) return "scalar";
  std::string s;
  for (int64_t d : t.sizes()) s += (s.empty() ? "" : "x") + std::to_string(d);
  return s;
}

std::string dtype_of(const at::Tensor& t) { return t.scalar_type() == at::kLong ? "int64" : "float32"; }

// torchvision's state_dict order: per module, its parameters, then its buffers.
std::vector<Entry> rn50_layout(Classifier& model) {
  std::vector<Entry> out;
  for (const auto& item : model.named_modules("", /*include_self=*/true)) {
    const std::string prefix = item.key().empty() ? "" : item.key() + ".";
    for (const auto& p : item.value()->named_parameters(false))
      out.push_back({prefix + p.key(), dtype_of(p.value()), shape_of(p.value())});
    for (const auto& b : item.value()->named_buffers(false))
      out.push_back({prefix + b.key(), dtype_of(b.value()), shape_of(b.value())});
  }
  return out;
}

class TorchvisionLayout : public ::testing::TestWithParam<std::string> {};

TEST_P(TorchvisionLayout, NamesShapesAndCountMatch) {
  int64_t expected_params = 0;
  const auto expected = torchvision_layout(GetParam(), &expected_params);
  auto model = create(GetParam(), ModelOptions{});
  const auto actual = rn50_layout(*model);
  ASSERT_EQ(actual.size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(actual[i].name, expected[i].name) << i;
    EXPECT_EQ(actual[i].shape, expected[i].shape) << expected[i].name;
    EXPECT_EQ(actual[i].dtype, expected[i].dtype) << expected[i].name;
  }
  EXPECT_EQ(testing::parameter_count(*model), expected_params);
  // The classifier the fine-tuning start and rn50 infer look for, and the names kept from weight decay, exist.
  EXPECT_TRUE(testing::parameter(*model, model->classifier_name() + ".weight").defined()) << model->classifier_name();
  for (const auto& name : model->no_weight_decay()) EXPECT_TRUE(testing::parameter(*model, name).defined()) << name;
}

INSTANTIATE_TEST_SUITE_P(EveryModel, TorchvisionLayout, ::testing::ValuesIn(names()));

// The registry and tests/fixtures name the same models, each once: a port's fixture and its table line are all this
// test needs (no list of names to keep here).
TEST(Registry, NamesEveryFixtureOnceAndNamesUnknownModels) {
  const auto registered = names();
  const std::set<std::string> unique(registered.begin(), registered.end());
  EXPECT_EQ(unique.size(), registered.size()) << "a model is registered twice";
  EXPECT_GE(unique.size(), 10u);  // the ResNets, ResNeXt, ConvNeXt, ViT, EfficientNet, AlexNet
  std::set<std::string> fixtures;
  const std::string prefix = "torchvision_", suffix = ".txt";
  for (const auto& entry : std::filesystem::directory_iterator(RN50_FIXTURES)) {
    const std::string file = entry.path().filename().string();
    if (file.size() > prefix.size() + suffix.size() && file.rfind(prefix, 0) == 0 &&
        file.compare(file.size() - suffix.size(), suffix.size(), suffix) == 0)
      fixtures.insert(file.substr(prefix.size(), file.size() - prefix.size() - suffix.size()));
  }
  EXPECT_EQ(unique, fixtures) << "every registered model needs tests/fixtures/torchvision_<name>.txt and every fixture "
                                 "a registered model";
  try {
    create("resnet51", ModelOptions{});
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("resnet51"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("vit_b_16"), std::string::npos);  // the known ones are listed
  }
}

std::string read_text(const std::filesystem::path& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << "cannot read " << path;
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The line of `text` that starts with `start` ("" when none).
std::string line_starting(const std::string& text, const std::string& start) {
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);)
    if (line.rfind(start, 0) == 0) return line;
  return "";
}

bool names_word(const std::string& text, const std::string& word) {
  const auto is_word = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
  for (size_t at = text.find(word); at != std::string::npos; at = text.find(word, at + 1)) {
    const size_t end = at + word.size();
    if ((at == 0 || !is_word(text[at - 1])) && (end == text.size() || !is_word(text[end]))) return true;
  }
  return false;
}

// The pages a port lists itself on name every registered model: models.md's table (in backticks) and the `model`
// key's row of configuration.md; configuration.md's table of configs/ names every shipped file.
TEST(Registry, EveryModelAndConfigIsDocumented) {
  const std::filesystem::path docs(RN50_DOCS);
  const std::string models = read_text(docs / "models.md");
  const std::string configuration = read_text(docs / "configuration.md");
  const std::string model_row = line_starting(configuration, "| `model` |");
  ASSERT_FALSE(model_row.empty()) << "configuration.md has no row for the key model";
  for (const auto& name : names()) {
    EXPECT_NE(models.find("`" + name + "`"), std::string::npos) << "docs/models.md does not name " << name;
    EXPECT_TRUE(names_word(model_row, name)) << "configuration.md's `model` row does not name " << name;
  }
  for (const auto& entry : std::filesystem::directory_iterator(docs / ".." / "configs")) {
    if (entry.path().extension() != ".yaml") continue;
    const std::string file = entry.path().filename().string();
    EXPECT_NE(configuration.find("`" + file + "`"), std::string::npos)
        << "configuration.md's table of configs/ does not name " << file;
  }
}

// Every file in configs/ is a valid configuration of a registered model, at an image size the model takes.
TEST(Registry, EveryShippedConfigNamesARegisteredModel) {
  const std::filesystem::path configs = std::filesystem::path(RN50_FIXTURES) / ".." / ".." / "configs";
  const auto known = names();
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(configs)) {
    if (entry.path().extension() != ".yaml") continue;
    ++files;
    Config c;
    apply_yaml_file(c, entry.path().string());
    validate(c);
    ASSERT_NE(std::find(known.begin(), known.end(), c.model), known.end()) << entry.path();
    const int64_t fixed = create(c.model, ModelOptions{})->fixed_image_size();
    EXPECT_TRUE(fixed == 0 || fixed == c.image_size) << entry.path();
  }
  EXPECT_GE(files, 8);  // smoke, imagenet, baseline, optimized and one per port
}

// wgrad_stream acts only where fusion: conv fuses bottlenecks (the start-up line and the doctor's second step key on
// it): not in the basic-block ResNets, ResNeXt's grouped bottlenecks (fusion: bn's kernels) or the other families.
TEST(Registry, OnlyTheBottleneckResNetsHaveAWeightGradientStream) {
  for (const auto& name : names()) {
    const bool expected = name == "resnet50" || name == "resnet101" || name == "resnet152";
    EXPECT_EQ(has_weight_gradient_stream(name), expected) << name;
  }
  EXPECT_THROW(has_weight_gradient_stream("resnet51"), ConfigError);
}

// image_size's range is 16 to 1024 for every model, but alexnet's pools and convnext's downsamplings leave nothing
// below 63 and 32 px: such a run once started and failed at its first forward pass with LibTorch's message. Each model
// runs at its smallest size (min_image_size, or 16), and one pixel less fails.
TEST(Registry, EveryModelRunsAtItsSmallestImageSizeAndNotBelow) {
  torch::NoGradGuard no_grad;
  for (const auto& name : names()) {
    ModelOptions options;
    options.num_classes = 3;
    const auto model = create(name, options);
    if (model->fixed_image_size() > 0) continue;  // vit_b_16: 224 only
    model->eval();
    const int64_t least = std::max<int64_t>(16, model->min_image_size());
    EXPECT_NO_THROW(model->forward(torch::zeros({1, 3, least, least}))) << name << " at " << least;
    if (model->min_image_size() > 16) {
      EXPECT_ANY_THROW(model->forward(torch::zeros({1, 3, least - 1, least - 1}))) << name << " at " << least - 1;
    }
  }
}

}  // namespace
}  // namespace rn50::models
