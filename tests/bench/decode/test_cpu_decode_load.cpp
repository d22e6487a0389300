// tests/bench/decode/test_cpu_decode_load.cpp: CpuDecodeLoad, the decode threads bench-decode --cpu-load runs beside
// the GPU decode measurement: they decode until stopped, report a rate, stop promptly, and pass on a decode error.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "bench/decode/cpu_decode_bench.h"
#include "core/clock.h"
#include "core/errors.h"

namespace rn50::bench {
namespace {

TEST(CpuDecodeLoad, DecodesUntilStoppedAndStopsPromptly) {
  const auto files = make_benchmark_jpegs(4, 200, 150, 3);
  CpuDecodeLoad load(files, 64, 2);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const auto stopping = Clock::now();
  const double rate = load.stop();
  EXPECT_LT(seconds_since(stopping), 1.0);  // one image in flight per thread, a few ms each
  EXPECT_GT(rate, 10.0);                    // hundreds a second a core on this size
  EXPECT_EQ(load.stop(), rate);             // stopped once
}

// A file whose header reads but whose scan holds a second start-of-image marker: libjpeg's error in a thread reaches
// stop(); a file whose header does not read is refused before any thread starts.
TEST(CpuDecodeLoad, ADecodeErrorReachesStop) {
  auto files = make_benchmark_jpegs(1, 200, 150, 4);
  const size_t middle = files[0].size() / 2;
  files[0][middle] = 0xFF;
  files[0][middle + 1] = 0xD8;
  CpuDecodeLoad load(files, 64, 1);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_THROW(load.stop(), DecodeError);
  files[0].resize(files[0].size() / 2);
  EXPECT_THROW(CpuDecodeLoad(files, 64, 1), DecodeError);
}

TEST(CpuDecodeLoad, NothingToDecodeIsRefused) { EXPECT_THROW(CpuDecodeLoad({}, 64, 2), std::invalid_argument); }

}  // namespace
}  // namespace rn50::bench
