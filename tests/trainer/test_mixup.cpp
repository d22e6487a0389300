// tests/trainer/test_mixup.cpp: mixup and cutmix on random batches: what each does to the images and the weight it
// returns, off when the batch is not drawn, and the mixed loss as the cross-entropy of the mixed soft labels.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "trainer/mixup.h"

namespace rn50::trainer {
namespace {

// mixup alone: every image is lam * itself + (1 - lam) * its mirror in the batch, lam in [0, 1].
TEST(Mixup, BlendsEachImageWithTheReversedBatch) {
  torch::manual_seed(4);
  const torch::Tensor x = torch::randn({6, 3, 8, 8});
  const torch::Tensor y = torch::arange(6);
  MixupOptions o;
  o.mixup_alpha = 0.4;
  for (int draw = 0; draw < 5; ++draw) {
    torch::Tensor images = x.clone();
    const MixedLabels m = mix_batch(images, y, o);
    const double lam = m.weight.item<double>();
    EXPECT_GE(lam, 0.0);
    EXPECT_LE(lam, 1.0);
    EXPECT_TRUE(torch::allclose(images, x * lam + x.flip({0}) * (1 - lam), 1e-5, 1e-6));
    EXPECT_TRUE(torch::equal(m.second, y.flip({0})));
  }
}

// cutmix alone: the pixels that changed form one box, each taken from the reversed batch, and the weight is the share
// of the image outside it.
TEST(Mixup, CutmixReplacesOneBoxAndWeighsByTheAreaKept) {
  torch::manual_seed(5);
  const torch::Tensor x = torch::randn({4, 3, 16, 12});
  MixupOptions o;
  o.cutmix_alpha = 1.0;
  int boxes = 0;
  for (int draw = 0; draw < 8; ++draw) {
    torch::Tensor images = x.clone();
    const MixedLabels m = mix_batch(images, torch::arange(4), o);
    const torch::Tensor changed = (images != x).any(1).any(0);  // [H, W]
    const torch::Tensor from_mirror =
        torch::where(changed.view({1, 1, 16, 12}), images == x.flip({0}), torch::ones_like(images, torch::kBool));
    EXPECT_TRUE(from_mirror.all().item<bool>());
    const int64_t area = changed.sum().item<int64_t>();
    if (area > 0) {
      ++boxes;
      const auto rows = changed.any(1).nonzero(), cols = changed.any(0).nonzero();
      const int64_t h = rows.max().item<int64_t>() - rows.min().item<int64_t>() + 1;
      const int64_t w = cols.max().item<int64_t>() - cols.min().item<int64_t>() + 1;
      EXPECT_EQ(area, h * w);  // a rectangle
    }
    EXPECT_NEAR(m.weight.item<double>(), 1.0 - area / (16.0 * 12.0), 1e-6);
  }
  EXPECT_GT(boxes, 0);
}

// prob 0: nothing mixed, weight 1; both kinds on: every mixed batch is one or the other.
TEST(Mixup, ProbabilityZeroLeavesTheBatchAlone) {
  const torch::Tensor x = torch::randn({4, 3, 8, 8});
  MixupOptions o;
  o.mixup_alpha = 0.8;
  o.cutmix_alpha = 1.0;
  o.prob = 0;
  torch::Tensor images = x.clone();
  const MixedLabels m = mix_batch(images, torch::arange(4), o);
  EXPECT_TRUE(torch::equal(images, x));
  EXPECT_EQ(m.weight.item<double>(), 1.0);
}

// The weighted sum of the two smoothed losses equals the cross-entropy of the mixed, smoothed soft labels.
TEST(Mixup, WeightedLossIsTheSoftLabelCrossEntropy) {
  namespace F = torch::nn::functional;
  torch::manual_seed(6);
  const torch::Tensor logits = torch::randn({5, 7});
  const torch::Tensor y = torch::randint(7, {5}), y2 = y.flip({0});
  const double lam = 0.3, eps = 0.1;
  const auto smoothed = F::CrossEntropyFuncOptions().label_smoothing(eps);
  const double weighted =
      (F::cross_entropy(logits, y, smoothed) * lam + F::cross_entropy(logits, y2, smoothed) * (1 - lam)).item<double>();
  const torch::Tensor soft =
      (F::one_hot(y, 7) * lam + F::one_hot(y2, 7) * (1 - lam)).to(torch::kFloat) * (1 - eps) + eps / 7.0;
  const double reference = -(soft * logits.log_softmax(1)).sum(1).mean().item<double>();
  EXPECT_NEAR(weighted, reference, 1e-5);
}

}  // namespace
}  // namespace rn50::trainer
