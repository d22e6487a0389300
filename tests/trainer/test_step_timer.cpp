// tests/trainer/test_step_timer.cpp: the host step timer sums each phase and keeps its slowest step apart.
#include <gtest/gtest.h>

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
  HostStepTimer timer;
  const int gap = static_cast<int>(Phase::kBetweenSteps);
  std::this_thread::sleep_for(20ms);  // before the span's first step: not a gap between steps
  for (const auto pause : {1ms, 25ms, 1ms}) {
    timer.begin_step();
    timer.mark(Phase::kInput);
    std::this_thread::sleep_for(pause);  // after the step's last mark, before the next begin_step
  }
  timer.begin_step();
  timer.mark(Phase::kInput);
  const PhaseTimes times = timer.take_totals();
  EXPECT_GE(times.total[gap], 0.027);
  EXPECT_LT(times.total[gap], 0.045);  // 20 ms more if the wait before the first step had counted
  EXPECT_GE(times.slowest[gap], 0.025);
  EXPECT_LT(times.slowest[gap], times.total[gap] - 0.0015);
  // After take_totals the next step again starts a span: the sleep below is not a gap between steps.
  std::this_thread::sleep_for(20ms);
  timer.begin_step();
  timer.mark(Phase::kInput);
  EXPECT_EQ(timer.take_totals().total[gap], 0.0);
}

}  // namespace
}  // namespace rn50::trainer
