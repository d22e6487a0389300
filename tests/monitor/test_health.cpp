// tests/monitor/test_health.cpp: the doctor's NVML health rows against FakeNvml (a healthy H200 all ok, each degraded
// reading its warning, rows left out where NVML does not answer, the row read under training load), clock event
// reasons as words, and the count of other processes (PIDs of another namespace included).
#include "monitor/health.h"

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tests/monitor/fake_nvml.h"

namespace rn50::monitor {
namespace {

using testing::FakeGpu;
using testing::FakeMig;
using testing::FakeNvml;
using testing::FakeReadings;

constexpr unsigned kOwnPid = 4242;

// An H200 SXM as it should be: Gen5 x16, 700 W, applications clock at the maximum, only this process on it.
FakeGpu healthy_h200() {
  FakeGpu h200{"NVIDIA H200", "GPU-a0ad07f4-5a7e-6cb5-dc6a-488feace7e00", MigMode{false, false}, 7, {}, {}, 18u};
  h200.readings.pcie_link = PcieLink{5, 16, 5, 16};
  h200.readings.power_limits = PowerLimits{700, 700};
  h200.readings.sm_clocks = SmClocks{1980, 1980.0};
  h200.readings.clock_event_reasons = kClockEventGpuIdle;
  h200.readings.compute_pids = std::vector<unsigned>{kOwnPid};
  return h200;
}

class Health : public ::testing::Test {
 protected:
  Health() { nvml.gpus.push_back(healthy_h200()); }

  FakeReadings& readings() { return nvml.gpus[0].readings; }
  std::vector<HealthRow> rows(const NvmlDevice& device = {0, {}}) { return nvml_health_rows(nvml, device, kOwnPid); }

  // The row named `check`; fails the test when there is none.
  std::optional<HealthRow> row(const std::string& check, const NvmlDevice& device = {0, {}}) {
    for (const HealthRow& r : rows(device))
      if (r.check == check) return r;
    ADD_FAILURE() << "no row '" << check << "'";
    return std::nullopt;
  }

  std::vector<std::string> checks() {
    std::vector<std::string> names;
    for (const HealthRow& r : rows()) names.push_back(r.check);
    return names;
  }

  FakeNvml nvml;
};

TEST_F(Health, AHealthyGpuIsOkOnEveryRow) {
  const std::vector<HealthRow> all = rows();
  ASSERT_EQ(all.size(), 5u);
  for (const HealthRow& r : all) EXPECT_EQ(r.verdict, "ok") << r.check << ": " << r.value << " " << r.note;
  EXPECT_EQ(row("PCIe link")->value, "Gen5 x16 (max Gen5 x16)");
  EXPECT_EQ(row("PCIe link")->note, "read under load");
  EXPECT_EQ(row("power limit")->value, "700 W (default 700 W)");
  EXPECT_EQ(row("SM clock")->value, "applications 1980 MHz (max 1980 MHz)");
  EXPECT_EQ(row("clock limits now")->value, "none");  // idle only
  EXPECT_EQ(row("other processes on this GPU")->value, "0");
}

// One reading made worse, the warning it should give; every other row stays ok.
struct Degradation {
  const char* check;
  std::function<void(FakeReadings&)> degrade;
  const char* value;
  const char* note;
};

TEST_F(Health, EachDegradedReadingWarnsOnItsOwnRow) {
  const char* const slow_link =
      "read under load; a narrower or slower link than the GPU supports: the slot, a riser, or BIOS settings";
  const std::vector<Degradation> degradations = {
      {"PCIe link",
       [](FakeReadings& r) {
         r.pcie_link = PcieLink{5, 8, 5, 16};
       },
       "Gen5 x8 (max Gen5 x16)", slow_link},
      {"PCIe link",
       [](FakeReadings& r) {
         r.pcie_link = PcieLink{4, 16, 5, 16};
       },
       "Gen4 x16 (max Gen5 x16)", slow_link},
      {"power limit",
       [](FakeReadings& r) {
         r.power_limits = PowerLimits{500, 700};
       },
       "500 W (default 700 W)", "capped below the model's default: lower clocks under load"},
      {"SM clock",
       [](FakeReadings& r) {
         r.sm_clocks = SmClocks{1980, 1410.0};
       },
       "applications 1410 MHz (max 1980 MHz)",
       "applications clock set below the maximum: slower kernels ('nvidia-smi -rac' resets it)"},
      {"clock limits now", [](FakeReadings& r) { r.clock_event_reasons = kClockEventGpuIdle | kClockEventSwPowerCap; },
       "power cap", "the clocks are held down now (power, heat or the board); training runs slower"},
      {"other processes on this GPU",
       [](FakeReadings& r) {
         r.compute_pids = std::vector<unsigned>{17, kOwnPid, 99};
       },
       "2", "a shared GPU: other work competes for SMs and memory"},
  };
  for (const Degradation& degradation : degradations) {
    nvml.gpus[0] = healthy_h200();
    degradation.degrade(readings());
    for (const HealthRow& r : rows()) {
      if (r.check != degradation.check) {
        EXPECT_EQ(r.verdict, "ok") << r.check << " with a degraded " << degradation.check;
        continue;
      }
      EXPECT_EQ(r.verdict, "warn") << degradation.value;
      EXPECT_EQ(r.value, degradation.value);
      EXPECT_EQ(r.note, degradation.note);
    }
  }
}

TEST_F(Health, SettingsWarnOnlyBelowNinetyPercent) {
  readings().power_limits = PowerLimits{631, 700};  // 90.1% of the default
  readings().sm_clocks = SmClocks{1980, 1785.0};    // 90.2% of the maximum
  EXPECT_EQ(row("power limit")->verdict, "ok");
  EXPECT_EQ(row("SM clock")->verdict, "ok");
  readings().power_limits = PowerLimits{750, 700};  // raised above the default
  EXPECT_EQ(row("power limit")->verdict, "ok");
}

TEST_F(Health, WithoutAnApplicationsClockTheSmClockIsInformation) {
  readings().sm_clocks = SmClocks{1980, std::nullopt};  // applications clocks gone (CUDA 14) or unsupported
  EXPECT_EQ(row("SM clock")->verdict, "info");
  EXPECT_EQ(row("SM clock")->value, "max 1980 MHz");
}

TEST_F(Health, ClockLimitsWarnOnPowerHeatAndHardwareSlowdownOnly) {
  for (const uint64_t reason : {kClockEventSwPowerCap, kClockEventSwThermalSlowdown, kClockEventHwThermalSlowdown,
                                kClockEventHwSlowdown, kClockEventHwPowerBrakeSlowdown}) {
    readings().clock_event_reasons = kClockEventGpuIdle | reason;
    EXPECT_EQ(row("clock limits now")->verdict, "warn") << describe_clock_event_reasons(reason);
  }
  for (const uint64_t reason :
       {kClockEventApplicationsClocksSetting, kClockEventSyncBoost, kClockEventDisplayClockSetting}) {
    readings().clock_event_reasons = reason;
    EXPECT_EQ(row("clock limits now")->verdict, "info") << describe_clock_event_reasons(reason);
  }
  readings().clock_event_reasons = 0;
  EXPECT_EQ(row("clock limits now")->verdict, "ok");
  EXPECT_EQ(row("clock limits now")->value, "none");
}

TEST_F(Health, RowsAreLeftOutWhereNvmlDoesNotAnswer) {
  readings().pcie_link.reset();
  readings().clock_event_reasons.reset();
  EXPECT_EQ(checks(), (std::vector<std::string>{"power limit", "SM clock", "other processes on this GPU"}));
  readings().power_limits.reset();
  readings().sm_clocks.reset();
  readings().compute_pids.reset();
  EXPECT_TRUE(rows().empty());
}

TEST_F(Health, AMigInstanceReadsItsGpuButCountsItsOwnProcesses) {
  FakeMig instance{"MIG-5c89ea9d-9a3d-5c4f-a3b1-2b8e3c1f0d77", "NVIDIA H200 MIG 3g.71gb", {}};
  instance.readings.compute_pids = std::vector<unsigned>{kOwnPid};
  nvml.gpus[0].mig_mode = MigMode{true, true};
  nvml.gpus[0].mig_slots[1] = instance;
  readings().compute_pids = std::vector<unsigned>{kOwnPid, 7, 8};  // the other instances' work: not this one's
  readings().power_limits = PowerLimits{400, 700};
  const NvmlDevice mig{0, 1u};
  EXPECT_EQ(row("power limit", mig)->verdict, "warn");  // the GPU's limit
  EXPECT_EQ(row("PCIe link", mig)->value, "Gen5 x16 (max Gen5 x16)");
  EXPECT_EQ(row("other processes on this GPU", mig)->value, "0");
}

// Under training load: clock, power against the limit and the reasons in one row, a warning only when the clocks
// are held down; left out where NVML answers none of the three.
TEST_F(Health, UnderLoadRowWarnsWhenTheClocksAreHeldDown) {
  readings().sm_clock_mhz = 1980.0;
  readings().power_w = 655.0;
  readings().clock_event_reasons = 0;
  std::optional<HealthRow> load = under_load_row(nvml, {0, {}});
  ASSERT_TRUE(load);
  EXPECT_EQ(load->check, "under training load");
  EXPECT_EQ(load->value, "SM 1980 MHz, 655 W of 700 W, clock limits: none");
  EXPECT_EQ(load->verdict, "info");

  readings().sm_clock_mhz = 1410.0;
  readings().clock_event_reasons = kClockEventSwPowerCap;
  load = under_load_row(nvml, {0, {}});
  ASSERT_TRUE(load);
  EXPECT_EQ(load->value, "SM 1410 MHz, 655 W of 700 W, clock limits: power cap");
  EXPECT_EQ(load->verdict, "warn");

  readings().clock_event_reasons = kClockEventApplicationsClocksSetting;  // a setting, not a load limit
  EXPECT_EQ(under_load_row(nvml, {0, {}})->verdict, "info");

  readings().power_limits.reset();
  readings().clock_event_reasons.reset();
  EXPECT_EQ(under_load_row(nvml, {0, {}})->value, "SM 1410 MHz, 655 W");

  readings().sm_clock_mhz.reset();
  readings().power_w.reset();
  EXPECT_FALSE(under_load_row(nvml, {0, {}}));
}

TEST(ClockEventReasons, InWords) {
  EXPECT_EQ(describe_clock_event_reasons(0), "none");
  EXPECT_EQ(describe_clock_event_reasons(kClockEventGpuIdle), "none");
  EXPECT_EQ(describe_clock_event_reasons(kClockEventSwPowerCap), "power cap");
  EXPECT_EQ(describe_clock_event_reasons(kClockEventGpuIdle | kClockEventSwPowerCap | kClockEventSwThermalSlowdown),
            "power cap, thermal (software)");
  EXPECT_EQ(describe_clock_event_reasons(kClockEventHwThermalSlowdown | kClockEventHwSlowdown),
            "thermal (hardware), hardware slowdown");
  EXPECT_EQ(describe_clock_event_reasons(kClockEventApplicationsClocksSetting | kClockEventSyncBoost |
                                         kClockEventDisplayClockSetting),
            "applications clock setting, sync boost, display clock");
  EXPECT_EQ(describe_clock_event_reasons(kClockEventHwPowerBrakeSlowdown), "power brake (hardware)");
  EXPECT_EQ(describe_clock_event_reasons(0x600), "other (0x600)");  // bits newer NVML added
  EXPECT_EQ(describe_clock_event_reasons(kClockEventSwPowerCap | 0x200), "power cap, other (0x200)");
}

TEST(OtherProcesses, ExcludeThisProcess) {
  EXPECT_EQ(count_other_processes({}, kOwnPid), 0u);
  EXPECT_EQ(count_other_processes({kOwnPid}, kOwnPid), 0u);
  EXPECT_EQ(count_other_processes({kOwnPid, 5}, kOwnPid), 1u);
}

TEST(OtherProcesses, PidsOfAnotherNamespaceIncludeThisProcess) {
  // In a container NVML may list host PIDs: this process is one of them under a number it does not know.
  EXPECT_EQ(count_other_processes({912345}, kOwnPid), 0u);
  EXPECT_EQ(count_other_processes({912345, 912399}, kOwnPid), 1u);
}

}  // namespace
}  // namespace rn50::monitor
