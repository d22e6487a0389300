// tests/models/test_resnet.cpp: ResNet and ResNeXt: parameter counts, strides, groups, output shapes, layouts,
// initialisation, training steps, ResNeXt under fusion: conv.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <stdexcept>

#include "core/errors.h"
#include "models/model.h"
#include "models/resnet.h"
#include "tests/support/model_checks.h"

namespace rn50::models {
namespace {

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

TEST(ResNeXt50, GroupsSitInThe3x3ConvolutionAtTorchvisionsWidths) {
  auto model = create("resnext50_32x4d", ModelOptions{});
  EXPECT_EQ(testing::parameter_count(*model), 25028904);
  for (const auto& item : model->named_modules()) {
    const auto* c = item.value()->as<torch::nn::Conv2d>();
    if (item.key() == "layer1.0.conv2") {
      EXPECT_EQ(c->options.groups(), 32);
      EXPECT_EQ(c->weight.sizes(), (std::vector<int64_t>{128, 4, 3, 3}));  // width int(64 * 4 / 64) * 32
    }
    if (item.key() == "layer4.2.conv2") {
      EXPECT_EQ(c->options.groups(), 32);
      EXPECT_EQ(c->weight.sizes(), (std::vector<int64_t>{1024, 32, 3, 3}));
    }
    if (item.key() == "layer4.2.conv3") {
      EXPECT_EQ(c->weight.sizes(), (std::vector<int64_t>{2048, 1024, 1, 1}));
    }
    if (item.key() == "layer1.0.conv1") {
      EXPECT_EQ(c->options.groups(), 1);
    }
  }
}

TEST(ResNeXt50, BasicBlocksTakeNoGroups) {
  EXPECT_THROW(make_resnet(18, ModelOptions{}, 32, 4), std::invalid_argument);
}

TEST(ResNeXt50, ForwardAndATrainingStep) {
  torch::manual_seed(4);
  auto model = create("resnext50_32x4d", ModelOptions{6, false});  // zero-initialised branches would get no gradient
  model->eval();
  {
    torch::NoGradGuard no_grad;
    EXPECT_EQ(model->forward(torch::randn({3, 3, 64, 64})).sizes(), (std::vector<int64_t>{3, 6}));
  }
  EXPECT_TRUE(testing::step_reaches_and_changes_every_parameter(*model, 2, 64, 6));
}

TEST(ResNeXt50, KaimingInitialisationCountsTheGroupsFanOut) {
  torch::manual_seed(5);
  auto model = create("resnext50_32x4d", ModelOptions{1000, true});
  const at::Tensor w = testing::parameter(*model, "layer3.1.conv2.weight");  // [512, 16, 3, 3]
  const double expected = std::sqrt(2.0 / (512 * 9));  // fan_out = out_channels * k * k, as PyTorch computes it
  EXPECT_NEAR(w.std().item<double>(), expected, 0.02 * expected);
  EXPECT_EQ(testing::parameter(*model, "layer2.3.bn3.weight").abs().sum().item<double>(), 0);
}

// On the CPU fusion: bn and conv run the stem's max-pool (and every BatchNorm) as ATen's ops: the start-up line says
// so, and a training step's logits and gradients are fusion: off's bit for bit.
TEST(ResNet50, FusedStemOnTheCpuRunsTorchvisionsOps) {
  for (const Fusion fusion : {Fusion::kBatchNorm, Fusion::kConv}) {
    ModelOptions options{4, false};
    options.fusion = fusion;
    torch::manual_seed(7);
    auto fused = create("resnet18", options);
    EXPECT_NE(fused->describe_fusion(torch::zeros({2, 3, 32, 32})).find("stem max-pool: ATen (on the CPU)"),
              std::string::npos);
    options.fusion = Fusion::kOff;
    torch::manual_seed(7);
    auto plain = create("resnet18", options);
    const auto x = torch::randn({2, 3, 40, 40});
    const at::Tensor a = fused->forward(x), b = plain->forward(x);
    EXPECT_TRUE(torch::equal(a, b));
    a.sum().backward();
    b.sum().backward();
    EXPECT_TRUE(torch::equal(testing::parameter(*fused, "conv1.weight").grad(),
                             testing::parameter(*plain, "conv1.weight").grad()));
  }
}

// fusion: conv has dense convolutions only: the start-up line says the grouped bottlenecks run as bn, and a training
// step runs them so (on the CPU, ATen's ops) with the same result as fusion off.
TEST(ResNeXt50, FusionConvSaysTheGroupedBottlenecksRunAsBn) {
  ModelOptions options{5, false};
  options.fusion = Fusion::kConv;
  torch::manual_seed(6);
  auto fused = create("resnext50_32x4d", options);
  const std::string line = fused->describe_fusion(torch::zeros({2, 3, 64, 64}));
  EXPECT_NE(line.find("bottlenecks as bn (grouped 3x3 convolution (groups 32)"), std::string::npos) << line;
  options.fusion = Fusion::kOff;
  torch::manual_seed(6);
  auto plain = create("resnext50_32x4d", options);
  fused->train();
  plain->train();
  const auto x = torch::randn({2, 3, 64, 64});
  EXPECT_TRUE(torch::allclose(fused->forward(x), plain->forward(x), 1e-5, 1e-5));
  const auto resnet = create("resnet50", ModelOptions{5, false, Fusion::kConv});
  EXPECT_EQ(resnet->describe_fusion(torch::zeros({2, 3, 64, 64})).find("grouped"), std::string::npos);
}

}  // namespace
}  // namespace rn50::models
