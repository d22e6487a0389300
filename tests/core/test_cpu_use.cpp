// tests/core/test_cpu_use.cpp: /proc/stat's busy time parsed, and the cores other processes kept busy between two
// readings, this process's own time (and its data-parallel siblings') taken out.
#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "core/cpu_use.h"

namespace rn50 {
namespace {

TEST(CpuUse, BusyTimeIsTheCpuLineWithoutIdleAndIowait) {
  // user nice system idle iowait irq softirq steal guest guest_nice, at 100 ticks a second.
  const std::string stat = "cpu  1000 50 300 90000 700 20 30 100 400 0\ncpu0 500 25 150 45000 350 10 15 50 200 0\n";
  EXPECT_DOUBLE_EQ(*parse_host_busy_s(stat, 100), (1000 + 50 + 300 + 20 + 30 + 100) / 100.0);
}

TEST(CpuUse, AMissingOrShortCpuLineIsNone) {
  EXPECT_FALSE(parse_host_busy_s("", 100));
  EXPECT_FALSE(parse_host_busy_s("cpu0 1 2 3 4 5 6 7 8\n", 100));  // a single CPU's line, not the total
  EXPECT_FALSE(parse_host_busy_s("cpu  1 2 3 4 5 6 7\n", 100));
  EXPECT_FALSE(parse_host_busy_s("cpu  1 2 3 4 x 6 7 8\n", 100));
  EXPECT_FALSE(parse_host_busy_s("cpu  1 2 3 4 5 6 7 8\n", 0));
}

TEST(CpuUse, OthersAreTheHostsBusyTimeLessThisProcesssPerSecond) {
  const CpuTimes from{100.0, 10.0, 1000.0};
  // 10 s: the host busy for 30 CPU-seconds, this process for 12 of them: others kept 1.8 cores busy.
  const CpuTimes to{130.0, 22.0, 1010.0};
  EXPECT_DOUBLE_EQ(*other_processes_cores(from, to, 1), 1.8);
  // Two processes of one run on this host, each about as busy: the run took 24, others 0.6 cores.
  EXPECT_DOUBLE_EQ(*other_processes_cores(from, to, 2), 0.6);
  // Three would have used more than the host did (their use differs): never below 0.
  EXPECT_DOUBLE_EQ(*other_processes_cores(from, to, 3), 0.0);
  EXPECT_DOUBLE_EQ(*other_processes_cores(from, to, 0), 1.8);  // no count: this process alone
}

TEST(CpuUse, NoneWithoutTheHostsTimesOrWithoutTimePassing) {
  const CpuTimes from{100.0, 10.0, 1000.0};
  EXPECT_FALSE(other_processes_cores(from, CpuTimes{std::nullopt, 12.0, 1010.0}, 1));
  EXPECT_FALSE(other_processes_cores(from, CpuTimes{110.0, 12.0, 1000.0}, 1));
}

// This machine's own readings: the host's busy time counts this process's (a busy loop of 0.2 CPU-seconds, however
// long a loaded machine takes to give it), give or take the kernel's ticks.
TEST(CpuUse, TheHostsBusyTimeHoldsThisProcesss) {
  const CpuTimes from = read_cpu_times();
  ASSERT_TRUE(from.host_busy_s);
  volatile double sink = 0;
  CpuTimes to = from;
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (to.own_s - from.own_s < 0.2 && std::chrono::steady_clock::now() < give_up) {
    for (int i = 0; i < 1000000; ++i) sink = sink + 1;
    to = read_cpu_times();
  }
  ASSERT_GE(to.own_s - from.own_s, 0.2);
  EXPECT_GE(*to.host_busy_s - *from.host_busy_s, (to.own_s - from.own_s) - 0.05);
  EXPECT_TRUE(other_processes_cores(from, to, 1));
}

}  // namespace
}  // namespace rn50
