// tests/trainer/test_step_timer.cpp: the host step timer sums each phase and keeps its slowest step apart.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <thread>

#include "trainer/step_timer.h"

namespace rn50::trainer {
namespace {

using namespace std::chrono_literals;

TEST(HostStepTimer, SumsPhasesAndKeepsTheSlowestStep) {
  HostStepTimer timer;
  for (const auto input : {2ms, 30ms, 2ms}) {  // one slow input phase among three
    timer.begin_step();
    std::this_thread::sleep_for(input);
    timer.mark(Phase::kInput);
    std::this_thread::sleep_for(1ms);
    timer.mark(Phase::kForwardBackward);
  }
  const PhaseTimes times = timer.take_totals();
  const int input = static_cast<int>(Phase::kInput), compute = static_cast<int>(Phase::kForwardBackward);
  EXPECT_GE(times.total[input], 0.034);
  EXPECT_GE(times.slowest[input], 0.030);
  EXPECT_LT(times.slowest[input], times.total[input] - 0.003);  // the two short ones are not in it
  EXPECT_GE(times.total[compute], 0.003);
  EXPECT_LE(times.slowest[compute], times.total[compute]);
  EXPECT_EQ(times.total[static_cast<int>(Phase::kOptimizer)], 0.0);
  // Taken: the next span starts empty.
  const PhaseTimes next = timer.take_totals();
  EXPECT_EQ(next.total[input], 0.0);
  EXPECT_EQ(next.slowest[input], 0.0);
}

TEST(HostStepTimer, TimesTheGapsBetweenStepsButNotBeforeASpansFirstStep) {
  // Compared with the pauses as measured here, not as asked for: a loaded machine oversleeps by tens of ms. The wait
  // before the first step is far longer than any slack allowed, so counting it could not pass unseen.
  using Clock = std::chrono::steady_clock;
  const auto seconds_of = [](Clock::duration d) { return std::chrono::duration<double>(d).count(); };
  HostStepTimer timer;
  const int gap = static_cast<int>(Phase::kBetweenSteps);
  std::this_thread::sleep_for(200ms);  // before the span's first step: not a gap between steps
  double paused = 0, longest = 0;
  for (const auto pause : {1ms, 25ms, 1ms}) {
    timer.begin_step();
    timer.mark(Phase::kInput);
    const auto start = Clock::now();
    std::this_thread::sleep_for(pause);  // after the step's last mark, before the next begin_step
    const double slept = seconds_of(Clock::now() - start);
    paused += slept;
    longest = std::max(longest, slept);
  }
  timer.begin_step();
  timer.mark(Phase::kInput);
  const PhaseTimes times = timer.take_totals();
  EXPECT_GE(times.total[gap], paused);
  EXPECT_LT(times.total[gap], paused + 0.1);  // at least 0.2 s more if the wait before the first step had counted
  EXPECT_GE(times.slowest[gap], longest);
  EXPECT_LT(times.slowest[gap], times.total[gap] - 0.0015);  // the two 1 ms pauses are not in it
  // After take_totals the next step again starts a span: the sleep below is not a gap between steps.
  std::this_thread::sleep_for(20ms);
  timer.begin_step();
  timer.mark(Phase::kInput);
  EXPECT_EQ(timer.take_totals().total[gap], 0.0);
}

}  // namespace
}  // namespace rn50::trainer
