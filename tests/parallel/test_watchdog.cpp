// tests/parallel/test_watchdog.cpp: the stall watchdog fires once after the timeout, and not while beaten.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "parallel/watchdog.h"

namespace rn50::parallel {
namespace {

using namespace std::chrono_literals;

TEST(Watchdog, FiresOnceWhenTheLoopStopsBeating) {
  std::atomic<int> fired{0};
  Watchdog watchdog(200ms, [&] { ++fired; });
  for (int i = 0; i < 10; ++i) {  // 500 ms of beats every 50 ms: no stall
    std::this_thread::sleep_for(50ms);
    watchdog.beat();
  }
  EXPECT_EQ(fired.load(), 0);
  std::this_thread::sleep_for(700ms);  // silent for more than the timeout
  EXPECT_EQ(fired.load(), 1);
}

TEST(Watchdog, StopsPromptlyWhenDestroyed) {
  const auto start = std::chrono::steady_clock::now();
  {
    Watchdog watchdog(std::chrono::hours(1), [] { FAIL() << "fired"; });
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, 2s);
}

}  // namespace
}  // namespace rn50::parallel
