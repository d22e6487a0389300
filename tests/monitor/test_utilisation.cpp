// tests/monitor/test_utilisation.cpp: tests of UtilisationSampler against FakeNvml (exact statistics, unavailable
// metrics as null, GPM intervals, reset after each epoch, prompt thread stop) and of the UUID helpers.
#include "monitor/utilisation.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "tests/monitor/fake_nvml.h"

namespace rn50::monitor {
namespace {

using testing::FakeGpu;
using testing::FakeMig;
using testing::FakeNvml;

constexpr char kGpuUuid[] = "GPU-a0ad07f4-5a7e-6cb5-dc6a-488feace7e00";
constexpr char kMigUuid[] = "MIG-5c89ea9d-9a3d-5c4f-a3b1-2b8e3c1f0d77";
constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

// One H200 whose every reading is supported except power; GPU 1 is partitioned, its instance in slot 2.
std::shared_ptr<FakeNvml> make_nvml() {
  auto nvml = std::make_shared<FakeNvml>();
  FakeGpu h200{"NVIDIA H200", kGpuUuid, MigMode{false, false}, 7, {}, {}, std::nullopt};
  h200.readings.utilisation = UtilisationRates{0, 0};
  h200.readings.sm_clock_mhz = 1980;
  h200.readings.power_w = std::nullopt;  // "not supported"
  h200.readings.memory = MemoryInfo{0, 141ull << 30};
  h200.readings.pcie_rx_kb_per_s = 0;
  h200.readings.pcie_tx_kb_per_s = 0;
  nvml->gpus.push_back(h200);
  FakeGpu partitioned{"NVIDIA H100 80GB HBM3",
                      "GPU-bbbbbbbb-0000-0000-0000-000000000000",
                      MigMode{true, true},
                      7,
                      {},
                      {},
                      std::nullopt};
  FakeMig mig{kMigUuid, "NVIDIA H100 80GB HBM3 MIG 3g.40gb", {}};
  mig.readings.memory = MemoryInfo{2ull << 30, 40ull << 30};  // MIG: memory only, like NVML
  partitioned.mig_slots[2] = mig;
  nvml->gpus.push_back(partitioned);
  return nvml;
}

// make_nvml()'s GPU 0 with GPM on: its readings, which a test changes between samples.
testing::FakeReadings& with_gpm(FakeNvml& nvml) {
  testing::FakeReadings& readings = nvml.readings({0, {}});
  readings.gpm_supported = true;
  return readings;
}

std::optional<double> value(const UtilisationSummary& summary, const std::string& key) {
  for (const auto& [name, number] : summary)
    if (name == key) return number;
  ADD_FAILURE() << "no key " << key;
  return std::nullopt;
}

std::vector<std::string> keys(const UtilisationSummary& summary) {
  std::vector<std::string> names;
  for (const auto& entry : summary) names.push_back(entry.first);
  return names;
}

TEST(CudaUuid, FormatsLikeNvml) {
  const unsigned char bytes[16] = {0xa0, 0xad, 0x07, 0xf4, 0x5a, 0x7e, 0x6c, 0xb5,
                                   0xdc, 0x6a, 0x48, 0x8f, 0xea, 0xce, 0x7e, 0x00};
  EXPECT_EQ(format_cuda_uuid(bytes), kGpuUuid);
  // cudaUUID_t holds plain (signed) char: bytes above 0x7f must not sign-extend.
  const char signed_bytes[16] = {'\xff', '\x80', 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, '\x7f'};
  EXPECT_EQ(format_cuda_uuid(signed_bytes), "GPU-ff800001-0203-0405-0607-08090a0b0c7f");
}

TEST(CudaUuid, FindsGpusAndMigInstancesByUuid) {
  auto nvml = make_nvml();
  EXPECT_EQ(find_device_by_uuid(*nvml, kGpuUuid), (NvmlDevice{0, {}}));
  EXPECT_EQ(find_device_by_uuid(*nvml, "GPU-A0AD07F4-5A7E-6CB5-DC6A-488FEACE7E00"), (NvmlDevice{0, {}}));
  EXPECT_EQ(find_device_by_uuid(*nvml, kMigUuid), (NvmlDevice{1, 2u}));
  // CUDA's bytes of a MIG instance, formatted with the "GPU-" prefix, still find the instance.
  EXPECT_EQ(find_device_by_uuid(*nvml, "GPU-5c89ea9d-9a3d-5c4f-a3b1-2b8e3c1f0d77"), (NvmlDevice{1, 2u}));
  EXPECT_FALSE(find_device_by_uuid(*nvml, "GPU-00000000-0000-0000-0000-000000000000"));
}

TEST(Percentile, InterpolatesLinearlyBetweenClosestRanks) {
  EXPECT_EQ(percentile_of_sorted({7}, 5), 7);
  EXPECT_EQ(percentile_of_sorted({7}, 95), 7);
  EXPECT_DOUBLE_EQ(percentile_of_sorted({0, 100}, 5), 5);
  EXPECT_DOUBLE_EQ(percentile_of_sorted({1, 2, 3, 4}, 50), 2.5);
  EXPECT_EQ(percentile_of_sorted({1, 2, 3, 4}, 0), 1);
  EXPECT_EQ(percentile_of_sorted({1, 2, 3, 4}, 100), 4);
}

TEST(UtilisationSampler, RefusesAnUnknownUuid) {
  EXPECT_THROW(UtilisationSampler(make_nvml(), "GPU-00000000-0000-0000-0000-000000000000"), std::runtime_error);
}

TEST(UtilisationSampler, SummarisesAKnownSequenceExactly) {
  auto nvml = make_nvml();
  UtilisationSampler sampler(nvml, kGpuUuid, std::chrono::milliseconds(500));  // PCIe counters in every sample
  auto& readings = nvml->readings({0, {}});
  // gpu_util takes 0, 10, ..., 100 in a scrambled order: mean 50, p5 5, p95 95 (linear interpolation).
  for (int step : {3, 10, 0, 7, 1, 9, 4, 2, 8, 5, 6}) {
    readings.utilisation = UtilisationRates{10.0 * step, 50};
    readings.memory = MemoryInfo{static_cast<uint64_t>(step) << 30, 141ull << 30};
    readings.pcie_rx_kb_per_s = 1000.0 * step;
    sampler.sample_once();
  }
  const UtilisationSummary summary = sampler.take_epoch_summary();
  EXPECT_EQ(value(summary, "gpu_util_pct_mean"), 50);
  EXPECT_EQ(value(summary, "gpu_util_pct_p5"), 5);
  EXPECT_EQ(value(summary, "gpu_util_pct_p95"), 95);
  EXPECT_EQ(value(summary, "mem_bw_util_pct_p5"), 50);
  EXPECT_EQ(value(summary, "mem_used_gib_mean"), 5);
  EXPECT_EQ(value(summary, "mem_used_gib_p95"), 9.5);
  EXPECT_EQ(value(summary, "pcie_rx_mbps_p5"), 0.5);  // KB/s / 1000
  EXPECT_EQ(value(summary, "sm_clock_mhz_mean"), 1980);
  // Power is "not supported": null, never 0. No GPM on this fake: null too.
  for (const char* key : {"power_w_mean", "power_w_p5", "power_w_p95", "sm_util_pct_mean", "tensor_util_pct_p95"})
    EXPECT_EQ(value(summary, key), std::nullopt) << key;
  EXPECT_EQ(sampler.samples_taken(), 11u);
}

TEST(UtilisationSampler, AlwaysGivesTheSameKeysAsTheUnavailableSummary) {
  const UtilisationSummary unavailable = UtilisationSampler::unavailable_summary();
  ASSERT_EQ(unavailable.size(), 3 * kUtilisationMetrics.size());
  EXPECT_EQ(unavailable[0].first, "gpu_util_pct_mean");
  EXPECT_EQ(unavailable[1].first, "gpu_util_pct_p5");
  EXPECT_EQ(unavailable[2].first, "gpu_util_pct_p95");
  EXPECT_EQ(unavailable.back().first, "dram_bw_util_pct_p95");
  for (const auto& entry : unavailable) EXPECT_EQ(entry.second, std::nullopt) << entry.first;

  auto nvml = make_nvml();
  UtilisationSampler sampler(nvml, kGpuUuid);
  sampler.sample_once();
  EXPECT_EQ(keys(sampler.take_epoch_summary()), keys(unavailable));
  EXPECT_EQ(keys(sampler.take_epoch_summary()), keys(unavailable));
}

TEST(UtilisationSampler, StartsAfreshAfterEachSummary) {
  auto nvml = make_nvml();
  UtilisationSampler sampler(nvml, kGpuUuid);
  auto& readings = nvml->readings({0, {}});
  readings.utilisation = UtilisationRates{90, 10};
  sampler.sample_once();
  sampler.sample_once();
  EXPECT_EQ(value(sampler.take_epoch_summary(), "gpu_util_pct_mean"), 90);

  const UtilisationSummary empty = sampler.take_epoch_summary();  // no samples since: all null
  for (const auto& entry : empty) EXPECT_EQ(entry.second, std::nullopt) << entry.first;

  readings.utilisation = UtilisationRates{30, 10};
  sampler.sample_once();
  const UtilisationSummary next = sampler.take_epoch_summary();
  EXPECT_EQ(value(next, "gpu_util_pct_mean"), 30);  // the 90s are gone
  EXPECT_EQ(value(next, "gpu_util_pct_p5"), 30);
  EXPECT_EQ(value(next, "gpu_util_pct_p95"), 30);
}

// `times` samples with NVML reading `gpu_util` percent.
void sample_at(UtilisationSampler& sampler, FakeNvml& nvml, double gpu_util, int times) {
  nvml.readings({0, {}}).utilisation = UtilisationRates{gpu_util, 10};
  for (int i = 0; i < times; ++i) sampler.sample_once();
}

// The step records' means: each interval's samples alone, while the epoch's summary still sees them all.
TEST(UtilisationSampler, IntervalMeansCoverOnlyTheirOwnSamplesAndLeaveTheEpochWhole) {
  auto nvml = make_nvml();
  UtilisationSampler sampler(nvml, kGpuUuid);
  sample_at(sampler, *nvml, 90, 2);
  const UtilisationSummary first = sampler.take_interval_means();
  EXPECT_EQ(value(first, "gpu_util_pct"), 90);
  EXPECT_EQ(value(first, "power_w"), std::nullopt);  // unsupported: null, never 0
  EXPECT_EQ(keys(first), keys(UtilisationSampler::unavailable_interval_means()));

  const UtilisationSummary none = sampler.take_interval_means();  // no samples since
  for (const auto& entry : none) EXPECT_EQ(entry.second, std::nullopt) << entry.first;

  sample_at(sampler, *nvml, 30, 1);
  EXPECT_EQ(value(sampler.take_interval_means(), "gpu_util_pct"), 30);      // the 90s are not in it
  EXPECT_EQ(value(sampler.take_epoch_summary(), "gpu_util_pct_mean"), 70);  // (90 + 90 + 30) / 3: all three

  sampler.sample_once();  // the next epoch's first interval starts at its first sample
  EXPECT_EQ(value(sampler.take_interval_means(), "gpu_util_pct"), 30);
}

TEST(UtilisationSampler, ComputesGpmMetricsBetweenConsecutiveSamples) {
  auto nvml = make_nvml();
  auto& readings = with_gpm(*nvml);
  UtilisationSampler sampler(nvml, kGpuUuid);
  ASSERT_TRUE(sampler.gpm_supported());

  sampler.sample_once();  // the first sample only opens an interval
  EXPECT_EQ(value(sampler.take_epoch_summary(), "sm_util_pct_mean"), std::nullopt);

  for (double sm : {20.0, 40.0, 60.0}) {
    readings.gpm = GpmMetrics{sm, sm / 2, std::nullopt, 35};  // tensor utilisation not reported
    sampler.sample_once();
  }
  EXPECT_EQ(nvml->gpm_intervals, (std::vector<std::pair<int, int>>{{0, 1}, {1, 2}, {2, 3}}));
  const UtilisationSummary summary = sampler.take_epoch_summary();
  EXPECT_EQ(value(summary, "sm_util_pct_mean"), 40);
  EXPECT_DOUBLE_EQ(*value(summary, "sm_util_pct_p5"), 22);
  EXPECT_DOUBLE_EQ(*value(summary, "sm_util_pct_p95"), 58);
  EXPECT_EQ(value(summary, "sm_occupancy_pct_mean"), 20);
  EXPECT_EQ(value(summary, "dram_bw_util_pct_p95"), 35);
  EXPECT_EQ(value(summary, "tensor_util_pct_mean"), std::nullopt);
}

// NVML's GPM DRAM-bandwidth metric was NaN in some intervals on the H200: left out, not a null epoch mean.
TEST(UtilisationSampler, LeavesOutNonFiniteReadings) {
  auto nvml = make_nvml();
  auto& readings = with_gpm(*nvml);
  UtilisationSampler sampler(nvml, kGpuUuid);
  sampler.sample_once();  // opens the first GPM interval
  for (double dram : {40.0, std::nan(""), 60.0, std::numeric_limits<double>::infinity()}) {
    readings.gpm = GpmMetrics{std::isfinite(dram) ? 50.0 : 0.0, 25, 10, dram};
    readings.sm_clock_mhz = std::isinf(dram) ? std::nan("") : 1980.0;
    sampler.sample_once();
  }
  const UtilisationSummary summary = sampler.take_epoch_summary();
  EXPECT_EQ(value(summary, "dram_bw_util_pct_mean"), 50);  // (40 + 60) / 2
  EXPECT_EQ(value(summary, "dram_bw_util_pct_p5"), 41);
  EXPECT_EQ(value(summary, "dram_bw_util_pct_p95"), 59);
  EXPECT_EQ(value(summary, "sm_clock_mhz_mean"), 1980);  // four readings of five
  EXPECT_EQ(value(summary, "sm_util_pct_mean"), 50);
}

// An interval with one non-finite GPM metric loses all four: its other metrics were off too on the H200.
TEST(UtilisationSampler, LeavesOutEveryGpmMetricOfAnIntervalWithANonFiniteOne) {
  auto nvml = make_nvml();
  auto& readings = with_gpm(*nvml);
  UtilisationSampler sampler(nvml, kGpuUuid);
  sampler.sample_once();
  readings.gpm = GpmMetrics{80, 40, 16, 50};
  sampler.sample_once();
  readings.gpm = GpmMetrics{20, 10, 4, std::nan("")};
  sampler.sample_once();
  readings.gpm = GpmMetrics{60, 30, std::nullopt, 30};  // an unsupported metric is not a non-finite one
  sampler.sample_once();
  const UtilisationSummary summary = sampler.take_epoch_summary();
  EXPECT_EQ(value(summary, "sm_util_pct_mean"), 70);  // (80 + 60) / 2
  EXPECT_EQ(value(summary, "sm_occupancy_pct_mean"), 35);
  EXPECT_EQ(value(summary, "tensor_util_pct_mean"), 16);
  EXPECT_EQ(value(summary, "dram_bw_util_pct_mean"), 40);
  EXPECT_EQ(value(summary, "gpu_util_pct_mean"), 0);  // the sample's other metrics stay
}

TEST(UtilisationSampler, SpacesGpmSamplesAtLeast100msApart) {
  auto nvml = make_nvml();
  nvml->readings({0, {}}).gpm_supported = true;
  nvml->readings({0, {}}).gpm = GpmMetrics{50, 50, 50, 50};
  UtilisationSampler sampler(nvml, kGpuUuid, std::chrono::milliseconds(25));  // GPM every 4th sample
  for (int i = 0; i < 9; ++i) sampler.sample_once();
  EXPECT_EQ(nvml->gpm_intervals, (std::vector<std::pair<int, int>>{{0, 1}, {1, 2}}));
  const UtilisationSummary summary = sampler.take_epoch_summary();
  EXPECT_EQ(value(summary, "sm_util_pct_mean"), 50);
  EXPECT_EQ(value(summary, "gpu_util_pct_mean"), 0);  // the other metrics every sample
}

// The PCIe counters block 20 ms each: at the default 100 ms period they are read every fifth sample.
TEST(UtilisationSampler, ReadsThePcieCountersAtMostEvery500ms) {
  auto nvml = make_nvml();
  auto& readings = nvml->readings({0, {}});
  UtilisationSampler sampler(nvml, kGpuUuid);
  for (int i = 0; i < 11; ++i) {
    readings.pcie_rx_kb_per_s = 1000.0 * i;
    readings.utilisation = UtilisationRates{10.0 * i, 0};
    sampler.sample_once();
  }
  EXPECT_EQ(nvml->pcie_rx_calls, 3);  // samples 0, 5 and 10
  const UtilisationSummary summary = sampler.take_epoch_summary();
  EXPECT_EQ(value(summary, "pcie_rx_mbps_mean"), 5);   // (0 + 5 + 10) / 3
  EXPECT_EQ(value(summary, "gpu_util_pct_mean"), 50);  // the other metrics every sample
}

TEST(UtilisationSampler, SamplesAMigInstanceWithWhatNvmlReportsForIt) {
  auto nvml = make_nvml();
  UtilisationSampler sampler(nvml, kMigUuid);
  EXPECT_EQ(sampler.device(), (NvmlDevice{1, 2u}));
  sampler.sample_once();
  const UtilisationSummary summary = sampler.take_epoch_summary();
  EXPECT_EQ(value(summary, "mem_used_gib_mean"), 2);
  EXPECT_EQ(value(summary, "gpu_util_pct_mean"), std::nullopt);
  EXPECT_EQ(value(summary, "sm_clock_mhz_p95"), std::nullopt);
}

TEST(UtilisationSampler, AFailingQueryCountsAsUnavailableAndSamplingGoesOn) {
  auto nvml = make_nvml();
  auto& readings = nvml->readings({0, {}});
  readings.power_throws = true;
  readings.utilisation = UtilisationRates{70, 10};
  UtilisationSampler sampler(nvml, kGpuUuid);
  sampler.sample_once();
  sampler.sample_once();
  const UtilisationSummary summary = sampler.take_epoch_summary();
  EXPECT_EQ(value(summary, "power_w_mean"), std::nullopt);
  EXPECT_EQ(value(summary, "gpu_util_pct_mean"), 70);
  EXPECT_EQ(value(summary, "mem_used_gib_mean"), 0);
}

// Waits (up to 5 s) for `done`; the thread tests depend on a running thread, not on timing.
template <class Condition>
bool eventually(Condition done) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

TEST(UtilisationSampler, ThreadSamplesEveryPeriod) {
  auto nvml = make_nvml();
  nvml->readings({0, {}}).utilisation = UtilisationRates{80, 20};
  UtilisationSampler sampler(nvml, kGpuUuid, std::chrono::milliseconds(1));
  sampler.start();
  sampler.start();  // a second start is a no-op
  ASSERT_TRUE(eventually([&] { return sampler.samples_taken() >= 5; }));
  sampler.stop();
  const size_t taken = sampler.samples_taken();
  EXPECT_EQ(value(sampler.take_epoch_summary(), "gpu_util_pct_p95"), 80);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(sampler.samples_taken(), taken);  // stopped means stopped
}

TEST(UtilisationSampler, ThreadStopsPromptlyInTheMiddleOfALongPeriod) {
  auto nvml = make_nvml();
  auto sampler = std::make_unique<UtilisationSampler>(nvml, kGpuUuid, std::chrono::hours(1));
  sampler->start();
  ASSERT_TRUE(eventually([&] { return nvml->utilisation_calls.load() >= 1; }));
  const auto before = std::chrono::steady_clock::now();
  sampler.reset();  // the destructor wakes the thread from its hour-long wait and joins it
  EXPECT_LT(std::chrono::steady_clock::now() - before, std::chrono::milliseconds(500));
  EXPECT_EQ(nvml->utilisation_calls.load(), 1);
}

}  // namespace
}  // namespace rn50::monitor
