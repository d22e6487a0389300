// tests/trainer/test_lr_schedule.cpp: warm-up, cosine and step values of the learning-rate schedule.
#include <gtest/gtest.h>

#include <cmath>

#include "trainer/lr_schedule.h"

namespace rn50::trainer {
namespace {

TEST(LrSchedule, LinearScalingRule) {
  EXPECT_DOUBLE_EQ(scaled_lr(0.1, 256), 0.1);
  EXPECT_DOUBLE_EQ(scaled_lr(0.1, 1024), 0.4);
  EXPECT_DOUBLE_EQ(scaled_lr(0.1, 64), 0.025);
}

TEST(LrSchedule, WarmupThenCosine) {
  LrSchedule s;
  s.peak_lr = 0.4;
  s.steps_per_epoch = 10;
  s.warmup_epochs = 2;
  s.epochs = 12;
  EXPECT_DOUBLE_EQ(s.at(0), 0.4 / 20);
  EXPECT_DOUBLE_EQ(s.at(9), 0.4 * 10 / 20);
  EXPECT_DOUBLE_EQ(s.at(19), 0.4);
  EXPECT_DOUBLE_EQ(s.at(20), 0.4);         // cosine starts at the peak
  EXPECT_NEAR(s.at(20 + 50), 0.2, 1e-12);  // half way through the 100 decay steps
  EXPECT_NEAR(s.at(20 + 25), 0.2 * (1 + std::cos(M_PI / 4)), 1e-12);
  EXPECT_NEAR(s.at(119), 0.2 * (1 + std::cos(M_PI * 99 / 100)), 1e-12);
  for (int64_t i = 21; i < 120; ++i) EXPECT_LT(s.at(i), s.at(i - 1));
}

TEST(LrSchedule, StepDecayAtMilestones) {
  LrSchedule s;
  s.peak_lr = 1.0;
  s.steps_per_epoch = 5;
  s.warmup_epochs = 0;
  s.epochs = 10;
  s.decay = LrSchedule::Decay::kStep;
  s.milestones = {3, 6};
  s.gamma = 0.1;
  EXPECT_DOUBLE_EQ(s.at(0), 1.0);
  EXPECT_DOUBLE_EQ(s.at(14), 1.0);
  EXPECT_DOUBLE_EQ(s.at(15), 0.1);
  EXPECT_NEAR(s.at(30), 0.01, 1e-15);
  EXPECT_NEAR(s.at(49), 0.01, 1e-15);
}

// torchvision's MobileNet recipes: warm-up, then StepLR(step_size 1, gamma) counted from the end of warm-up.
TEST(LrSchedule, ExponentialDecayEachEpochAfterWarmup) {
  LrSchedule s;
  s.peak_lr = 1.0;
  s.steps_per_epoch = 5;
  s.warmup_epochs = 2;
  s.epochs = 10;
  s.decay = LrSchedule::Decay::kExponential;
  s.gamma = 0.5;
  EXPECT_DOUBLE_EQ(s.at(0), 0.1);   // warm-up: 1/10 of the peak at the first step
  EXPECT_DOUBLE_EQ(s.at(9), 1.0);   // its last step reaches the peak
  EXPECT_DOUBLE_EQ(s.at(10), 1.0);  // the first epoch after warm-up keeps it
  EXPECT_DOUBLE_EQ(s.at(14), 1.0);
  EXPECT_DOUBLE_EQ(s.at(15), 0.5);
  EXPECT_DOUBLE_EQ(s.at(20), 0.25);
  EXPECT_NEAR(s.at(49), std::pow(0.5, 7), 1e-15);
}

TEST(LrSchedule, NoWarmupStartsAtPeak) {
  LrSchedule s;
  s.peak_lr = 0.1;
  s.steps_per_epoch = 4;
  s.epochs = 1;
  EXPECT_DOUBLE_EQ(s.at(0), 0.1);
  EXPECT_NEAR(s.at(2), 0.05, 1e-15);
}

}  // namespace
}  // namespace rn50::trainer
