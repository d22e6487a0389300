// tests/models/test_stem.cpp: the stem convolution with zero-padded input channels (stem_channels) against the plain
// one: outputs and weight gradients on fresh random inputs, the padded copies' layout (channels-last kept, float16
// too) and zeros, and a ResNet's logits and gradients with stem_channels 4 and 8 against 3.
#include "models/stem.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "models/model.h"

namespace rn50::models {
namespace {

// Relative L2 difference; float32 sums in another order differ by about 1e-7 relative, so 1e-5 is room enough and
// far below what a missing or misplaced channel would give (order 1).
double relative(const at::Tensor& a, const at::Tensor& b) {
  return ((a - b).norm() / b.norm()).item<double>();
}

TEST(StemConv, ZeroChannelsGiveTheSameOutputAndWeightGradient) {
  torch::manual_seed(11);
  for (const bool channels_last : {false, true}) {
    const auto format = channels_last ? at::MemoryFormat::ChannelsLast : at::MemoryFormat::Contiguous;
    const at::Tensor x = torch::randn({3, 3, 40, 36}).contiguous(format);
    const at::Tensor w = (torch::randn({16, 3, 7, 7}) * 0.1).contiguous(format).requires_grad_(true);
    const at::Tensor dy = torch::randn({3, 16, 20, 18});
    const at::Tensor y3 = stem_conv(x, w, 3);
    const at::Tensor dw3 = torch::autograd::grad({y3}, {w}, {dy})[0];
    EXPECT_EQ(y3.sizes(), (std::vector<int64_t>{3, 16, 20, 18}));
    for (const int64_t channels : {4, 8}) {
      const at::Tensor y = stem_conv(x, w, channels);
      const at::Tensor dw = torch::autograd::grad({y}, {w}, {dy})[0];
      EXPECT_LT(relative(y, y3), 1e-5) << channels << " channels, channels_last " << channels_last;
      EXPECT_EQ(dw.sizes(), w.sizes());
      EXPECT_LT(relative(dw, dw3), 1e-5) << channels << " channels, channels_last " << channels_last;
      EXPECT_EQ(y.is_contiguous(at::MemoryFormat::ChannelsLast), channels_last);
    }
  }
}

// The point of the padding: cuDNN's channels-last kernels for 4 or 8 channels. A padded copy in NCHW would have it
// transpose the image first, so the copies keep the layout (the image and the weight; float16 too, as autocast
// hands the image over), and the extra channels are zeros.
TEST(StemConv, PaddedCopiesKeepTheLayoutAndAddZeros) {
  for (const auto dtype : {at::kFloat, at::kHalf}) {
    const at::Tensor image = torch::randn({2, 3, 16, 16}).to(dtype).contiguous(at::MemoryFormat::ChannelsLast);
    const at::Tensor weight = torch::randn({64, 3, 7, 7}).contiguous(at::MemoryFormat::ChannelsLast);
    for (const int64_t channels : {4, 8}) {
      const at::Tensor x = pad_channels(image, channels), w = pad_channels(weight, channels);
      EXPECT_EQ(x.sizes(), (std::vector<int64_t>{2, channels, 16, 16}));
      EXPECT_EQ(w.sizes(), (std::vector<int64_t>{64, channels, 7, 7}));
      EXPECT_TRUE(x.is_contiguous(at::MemoryFormat::ChannelsLast)) << channels;
      EXPECT_TRUE(w.is_contiguous(at::MemoryFormat::ChannelsLast)) << channels;
      EXPECT_TRUE(w.to(at::kHalf).is_contiguous(at::MemoryFormat::ChannelsLast));  // autocast's cast keeps it
      EXPECT_TRUE(torch::equal(x.narrow(1, 0, 3), image));
      EXPECT_EQ(x.narrow(1, 3, channels - 3).abs().max().item<double>(), 0.0);
      EXPECT_EQ(w.narrow(1, 3, channels - 3).abs().max().item<double>(), 0.0);
    }
    EXPECT_TRUE(pad_channels(image, 3).is_same(image));
  }
}

TEST(StemConv, AResNetTrainsTheSameWithPaddedStemChannels) {
  torch::manual_seed(12);
  const at::Tensor x = torch::randn({2, 3, 64, 64});
  const at::Tensor target = torch::randint(0, 5, {2});
  at::Tensor logits3, stem_grad3;
  for (const int64_t channels : {3, 4, 8}) {
    ModelOptions options{5, false};
    options.stem_channels = channels;
    torch::manual_seed(13);  // the same weights each time
    auto model = create("resnet18", options);
    const at::Tensor logits = model->forward(x);
    torch::nn::functional::cross_entropy(logits, target).backward();
    const at::Tensor stem_grad = model->named_parameters()["conv1.weight"].grad();
    ASSERT_TRUE(stem_grad.defined());
    EXPECT_EQ(stem_grad.sizes(), (std::vector<int64_t>{64, 3, 7, 7}));
    if (channels == 3) {
      logits3 = logits.detach();
      stem_grad3 = stem_grad.clone();
      continue;
    }
    EXPECT_LT(relative(logits.detach(), logits3), 1e-5) << channels;
    EXPECT_LT(relative(stem_grad, stem_grad3), 1e-4) << channels;  // through BatchNorm's batch statistics
  }
}

// The training sources write the padded channels themselves (input_channels): a ResNet takes such images as they
// are, whatever finite values the padded channels hold (they meet zero weights), and gives the 3-channel image's
// logits and stem gradient; more channels than its stem takes is an error.
TEST(StemConv, AResNetTakesImagesThatComePadded) {
  torch::manual_seed(14);
  const at::Tensor x = torch::randn({2, 3, 48, 48});
  const at::Tensor target = torch::randint(0, 5, {2});
  for (const int64_t channels : {4, 8}) {
    ModelOptions options{5, false};
    options.stem_channels = channels;
    torch::manual_seed(15);
    auto model = create("resnet18", options);
    ASSERT_EQ(input_channels("resnet18", channels), channels);
    std::vector<at::Tensor> logits, grads;
    for (const bool padded : {false, true}) {
      at::Tensor input = x;
      if (padded) input = torch::cat({x, torch::randn({2, channels - 3, 48, 48})}, 1);
      model->zero_grad();
      logits.push_back(model->forward(input));
      torch::nn::functional::cross_entropy(logits.back(), target).backward();
      grads.push_back(model->named_parameters()["conv1.weight"].grad().clone());
    }
    EXPECT_LT(relative(logits[1].detach(), logits[0].detach()), 1e-5) << channels;
    EXPECT_LT(relative(grads[1], grads[0]), 1e-4) << channels;
    EXPECT_THROW(model->forward(torch::randn({2, channels + 1, 48, 48})), c10::Error);
  }
}

TEST(StemConv, OnlyTheResNetsTakeStemChannels) {
  for (const std::string name : {"resnet18", "resnet50", "resnext50_32x4d"}) {
    EXPECT_TRUE(takes_stem_channels(name)) << name;
    EXPECT_EQ(input_channels(name, 4), 4) << name;
    EXPECT_EQ(input_channels(name, 3), 3) << name;
  }
  for (const std::string name : {"vit_b_16", "convnext_tiny", "efficientnet_b0", "alexnet"}) {
    EXPECT_FALSE(takes_stem_channels(name)) << name;
    EXPECT_EQ(input_channels(name, 4), 3) << name;
  }
}

}  // namespace
}  // namespace rn50::models
