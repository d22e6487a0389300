// tests/models/test_resnet.cpp: ResNet layouts against torchvision's state dicts, shapes, initialisation, registry.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <fstream>
#include <sstream>

#include "core/errors.h"
#include "models/model.h"

namespace rn50::models {
namespace {

struct Entry {
  std::string name, dtype, shape;
};

// tests/fixtures/torchvision_<arch>.txt was written by tests/tools/dump_torchvision_resnet.py from torchvision.
std::vector<Entry> torchvision_layout(const std::string& arch, int64_t* params) {
  std::ifstream in(std::string(RN50_FIXTURES) + "/torchvision_" + arch + ".txt");
  EXPECT_TRUE(in.good()) << arch;
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
  int64_t params = 0;
  for (const auto& p : model->parameters()) params += p.numel();
  EXPECT_EQ(params, expected_params);
}

INSTANTIATE_TEST_SUITE_P(AllDepths, TorchvisionLayout,
                         ::testing::Values("resnet18", "resnet34", "resnet50", "resnet101", "resnet152"));

TEST(ResNet50, HasTorchvisionParameterCount) {
  auto model = create("resnet50", ModelOptions{});
  int64_t params = 0;
  for (const auto& p : model->parameters()) params += p.numel();
  EXPECT_EQ(params, 25557032);
}

TEST(ResNet50, StrideSitsInThe3x3Convolution) {  // v1.5, not v1
  auto model = create("resnet50", ModelOptions{});
  for (const auto& item : model->named_modules()) {
    if (item.key() == "layer2.0.conv1") {
      EXPECT_EQ(item.value()->as<torch::nn::Conv2d>()->options.stride()->at(0), 1);
    }
    if (item.key() == "layer2.0.conv2") {
      EXPECT_EQ(item.value()->as<torch::nn::Conv2d>()->options.stride()->at(0), 2);
    }
  }
}

TEST(ResNet50, OutputShapes) {
  torch::manual_seed(1);
  auto model = create("resnet50", ModelOptions{10, true});
  model->eval();
  torch::NoGradGuard no_grad;
  EXPECT_EQ(model->forward(torch::randn({2, 3, 224, 224})).sizes(), (std::vector<int64_t>{2, 10}));
  EXPECT_EQ(model->forward(torch::randn({3, 3, 64, 80})).sizes(), (std::vector<int64_t>{3, 10}));
}

TEST(ResNet50, ChannelsLastGivesTheSameLogits) {
  torch::manual_seed(2);
  auto model = create("resnet18", ModelOptions{7, false});
  model->eval();
  torch::NoGradGuard no_grad;
  const auto x = torch::randn({2, 3, 64, 64});
  const auto reference = model->forward(x);
  for (auto& p : model->parameters()) {
    if (p.dim() == 4) p.set_data(p.contiguous(at::MemoryFormat::ChannelsLast));
  }
  const auto y = model->forward(x.contiguous(at::MemoryFormat::ChannelsLast));
  EXPECT_LT((y - reference).abs().max().item<double>(), 1e-4);
}

TEST(ResNet50, InitialisationFollowsTorchvision) {
  torch::manual_seed(3);
  auto model = create("resnet50", ModelOptions{1000, true});
  for (const auto& item : model->named_parameters()) {
    const auto& name = item.key();
    const auto& p = item.value();
    if (name == "layer1.0.bn3.weight" || name == "layer4.2.bn3.weight") {
      EXPECT_EQ(p.abs().sum().item<double>(), 0) << name;
    }
    if (name == "layer1.0.bn2.weight" || name == "bn1.weight") {
      EXPECT_EQ(p.min().item<double>(), 1.0) << name;
    }
    if (name == "layer3.1.conv2.weight") {
      // Kaiming normal, fan_out mode: std = sqrt(2 / (out_channels * k * k)).
      const double expected = std::sqrt(2.0 / (256 * 9));
      EXPECT_NEAR(p.std().item<double>(), expected, 0.02 * expected);
      EXPECT_NEAR(p.mean().item<double>(), 0.0, 0.02 * expected);
    }
  }
  auto plain = create("resnet50", ModelOptions{1000, false});
  for (const auto& item : plain->named_parameters()) {
    if (item.key() == "layer1.0.bn3.weight") {
      EXPECT_EQ(item.value().min().item<double>(), 1.0);
    }
  }
}

TEST(Registry, KnowsTheResNetsAndNamesUnknownModels) {
  EXPECT_EQ(names(), (std::vector<std::string>{"resnet18", "resnet34", "resnet50", "resnet101", "resnet152"}));
  try {
    create("resnet51", ModelOptions{});
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("resnet51"), std::string::npos);
  }
}

}  // namespace
}  // namespace rn50::models
