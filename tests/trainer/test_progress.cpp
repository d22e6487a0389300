// tests/trainer/test_progress.cpp: the epoch's progress line and time left: the text, the run's estimate, and a
// redraw at most twice a second and at the last step.
#include "trainer/progress.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace rn50::trainer {
namespace {

using std::chrono::milliseconds;

TEST(Progress, DurationsReadLikeACountdown) {
  EXPECT_EQ(format_duration(42.4), "42s");
  EXPECT_EQ(format_duration(725), "12m05s");
  EXPECT_EQ(format_duration(3 * 3600 + 7 * 60 + 20), "3h07m");
  EXPECT_EQ(format_duration(2 * 86400 + 4 * 3600), "2d04h");
  EXPECT_EQ(format_duration(-1), "?");
}

TEST(Progress, TheLineGivesStepsRateAndTimeLeftInTheEpochAndRun) {
  const Clock::time_point t0{};
  // Epoch 3 of 90, 1000 steps of 256 images; 250 steps done in 10 s: 40 ms a step, 6,400 img/s.
  const EpochProgress first(3, 90, 1000, 256, 0, t0, nullptr);
  EXPECT_EQ(first.line(250, t0 + milliseconds(10000)),
            "epoch 3/90: 250/1000 steps (25.0%), 6400 img/s, 30s left in the epoch, 58m30s in the run");
  // The 87 epochs after this one as long as this one's 40 s. With whole epochs timed (validation included: 50 s each),
  // the 87 epochs after this one take 50 s each.
  const EpochProgress timed(3, 90, 1000, 256, 50, t0, nullptr);
  EXPECT_EQ(timed.time_left(250, t0 + milliseconds(10000)), "30s left in the epoch, 1h13m in the run");
  EXPECT_EQ(timed.time_left(0, t0), "time left unknown yet");
}

// Resumed at step 600 of 1000: the rate and the time left come from the steps taken since (250 in 10 s), not from
// the 850 counted from the epoch's start (which once gave a tenth of the time left).
TEST(Progress, AResumedEpochIsTimedFromTheStepItResumedAt) {
  const Clock::time_point t0{};
  const EpochProgress resumed(3, 3, 1000, 256, 0, t0, nullptr, /*first_step=*/600);
  EXPECT_EQ(resumed.line(850, t0 + milliseconds(10000)),
            "epoch 3/3: 850/1000 steps (85.0%), 6400 img/s, 6s left in the epoch, 6s in the run");
  EXPECT_EQ(resumed.time_left(600, t0), "time left unknown yet");
}

TEST(Progress, RedrawsAtMostTwiceASecondAndAlwaysAtTheLastStep) {
  std::vector<std::string> shown;
  const Clock::time_point t0 = Clock::now();
  {
    EpochProgress p(1, 2, 100, 8, 0, t0,
                    [&](const std::vector<std::string>& forms) { shown.push_back(forms.empty() ? "" : forms[0]); });
    p.step_done(1, t0 + milliseconds(10));
    p.step_done(2, t0 + milliseconds(200));  // too soon after the last drawing
    p.step_done(3, t0 + milliseconds(600));
    p.step_done(100, t0 + milliseconds(700));  // the last step: drawn however soon
  }
  ASSERT_EQ(shown.size(), 4u);  // three lines, then "" when the epoch is over
  EXPECT_NE(shown[0].find(" 1/100 steps"), std::string::npos) << shown[0];
  EXPECT_NE(shown[1].find(" 3/100 steps"), std::string::npos) << shown[1];
  EXPECT_NE(shown[2].find(" 100/100 steps (100.0%)"), std::string::npos) << shown[2];
  EXPECT_EQ(shown[3], "");
}

// A narrow terminal gets a short form whole, with the time left, rather than the long line cut; a slow run's rate
// keeps two figures instead of reading "0 img/s".
TEST(Progress, ShortFormsKeepTheTimeLeftAndSlowRatesKeepTwoFigures) {
  const Clock::time_point t0{};
  const EpochProgress p(3, 90, 1000, 256, 0, t0, nullptr);
  const auto forms = p.forms(250, t0 + milliseconds(10000));
  ASSERT_EQ(forms.size(), 3u);
  EXPECT_EQ(forms[1], "epoch 3/90 25.0%, 6400 img/s, 30s left, run 58m30s");
  EXPECT_EQ(forms[2], "3/90 25.0% 30s left");
  EXPECT_LT(forms[1].size(), 60u);
  const EpochProgress slow(1, 2, 10, 2, 0, t0, nullptr);
  EXPECT_NE(slow.line(1, t0 + milliseconds(5000)).find(", 0.4 img/s,"), std::string::npos)
      << slow.line(1, t0 + milliseconds(5000));
}

}  // namespace
}  // namespace rn50::trainer
