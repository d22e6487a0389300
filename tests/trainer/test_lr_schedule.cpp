// tests/trainer/test_lr_schedule.cpp: warm-up, cosine, step and exponential values of the learning-rate schedule.
#include <gtest/gtest.h>

#include <cmath>

#include "trainer/lr_schedule.h"

namespace rn50::trainer {
namespace {

LrSchedule schedule(LrSchedule::Decay decay, double peak_lr, int64_t steps_per_epoch, double warmup_epochs,
                    int epochs) {
  LrSchedule s;
  s.decay = decay;
  s.peak_lr = peak_lr;
  s.steps_per_epoch = steps_per_epoch;
  s.warmup_epochs = warmup_epochs;
  s.epochs = epochs;
  return s;
}

TEST(LrSchedule, LinearScalingRule) {
  EXPECT_DOUBLE_EQ(scaled_lr(0.1, 256), 0.1);
  EXPECT_DOUBLE_EQ(scaled_lr(0.1, 1024), 0.4);
  EXPECT_DOUBLE_EQ(scaled_lr(0.1, 64), 0.025);
}

TEST(LrSchedule, WarmupThenCosine) {
  const LrSchedule s = schedule(LrSchedule::Decay::kCosine, 0.4, 10, 2, 12);
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
  LrSchedule s = schedule(LrSchedule::Decay::kStep, 1.0, 5, 0, 10);
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
  LrSchedule s = schedule(LrSchedule::Decay::kExponential, 1.0, 5, 2, 10);
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
  const LrSchedule s = schedule(LrSchedule::Decay::kCosine, 0.1, 4, 0, 1);
  EXPECT_DOUBLE_EQ(s.at(0), 0.1);
  EXPECT_NEAR(s.at(2), 0.05, 1e-15);
}

}  // namespace
}  // namespace rn50::trainer
