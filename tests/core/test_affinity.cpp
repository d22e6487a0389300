// tests/core/test_affinity.cpp: the affinity mask's CPUs, and pinning a thread to one of them.
#include <gtest/gtest.h>
#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <thread>

#include "core/affinity.h"
#include "core/config.h"

namespace rn50 {
namespace {

// The calling thread's own mask, as the kernel holds it.
std::vector<int> this_threads_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> cpus;
  if (pthread_getaffinity_np(pthread_self(), sizeof(set), &set) != 0) return cpus;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu)
    if (CPU_ISSET(cpu, &set)) cpus.push_back(cpu);
  return cpus;
}

TEST(Affinity, UsableCpusAreTheProcessMaskInOrder) {
  const std::vector<int> cpus = usable_cpus();
  ASSERT_FALSE(cpus.empty());
  EXPECT_TRUE(std::is_sorted(cpus.begin(), cpus.end()));
  EXPECT_LE(usable_cores(), static_cast<int>(cpus.size()));  // fewer under a CPU quota (tests/core/test_limits.cpp)
  cpu_set_t set;
  CPU_ZERO(&set);
  ASSERT_EQ(sched_getaffinity(0, sizeof(set), &set), 0);
  EXPECT_EQ(static_cast<int>(cpus.size()), CPU_COUNT(&set));
  for (int cpu : cpus) EXPECT_TRUE(CPU_ISSET(cpu, &set)) << cpu;
}

TEST(Affinity, PinsOnlyTheCallingThread) {
  const std::vector<int> cpus = usable_cpus();
  const int target = cpus.back();
  std::vector<int> pinned_mask;
  int ran_on = -1;
  bool pinned = false;
  std::thread worker([&] {
    pinned = pin_this_thread(target);
    pinned_mask = this_threads_cpus();
    ran_on = sched_getcpu();
  });
  worker.join();
  ASSERT_TRUE(pinned);
  EXPECT_EQ(pinned_mask, std::vector<int>{target});
  EXPECT_EQ(ran_on, target);
  EXPECT_EQ(this_threads_cpus(), cpus);  // this thread keeps the whole mask
}

TEST(Affinity, RefusesACpuOutsideTheRangeAndKeepsTheMask) {
  std::vector<int> before, after;
  bool negative = true, too_large = true;
  std::thread worker([&] {
    before = this_threads_cpus();
    negative = pin_this_thread(-1);
    too_large = pin_this_thread(CPU_SETSIZE);
    after = this_threads_cpus();
  });
  worker.join();
  EXPECT_FALSE(negative);
  EXPECT_FALSE(too_large);
  EXPECT_EQ(after, before);
}

}  // namespace
}  // namespace rn50
