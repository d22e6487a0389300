// monitor/health.cpp: the doctor's NVML health rows and their thresholds; clock event reasons as words.
#include "monitor/health.h"

#include <algorithm>
#include <optional>

#include "core/log.h"

namespace rn50::monitor {
namespace {

// A power limit or applications clock below this share of the GPU's own default or maximum is a setting someone
// lowered, not measurement noise: both are whole settings, and a lowered one costs 10% or more of the speed.
constexpr double kLoweredSettingShare = 0.9;

struct ClockEventWords {
  uint64_t bit;
  const char* words;
};

constexpr ClockEventWords kClockEventWords[] = {
    {kClockEventSwPowerCap, "power cap"},
    {kClockEventSwThermalSlowdown, "thermal (software)"},
    {kClockEventHwThermalSlowdown, "thermal (hardware)"},
    {kClockEventHwSlowdown, "hardware slowdown"},
    {kClockEventHwPowerBrakeSlowdown, "power brake (hardware)"},
    {kClockEventApplicationsClocksSetting, "applications clock setting"},
    {kClockEventSyncBoost, "sync boost"},
    {kClockEventDisplayClockSetting, "display clock"},
};

// The reasons that hold the clocks down under load, as opposed to settings and idling.
constexpr uint64_t kClockEventsThatSlowTraining = kClockEventSwPowerCap | kClockEventSwThermalSlowdown |
                                                  kClockEventHwThermalSlowdown | kClockEventHwSlowdown |
                                                  kClockEventHwPowerBrakeSlowdown;

HealthRow pcie_row(const PcieLink& link) {
  const bool degraded = link.width < link.max_width || link.generation < link.max_generation;
  return {"PCIe link",
          strprintf("Gen%u x%u (max Gen%u x%u)", link.generation, link.width, link.max_generation, link.max_width),
          degraded ? "warn" : "ok",
          degraded ? "read under load; a narrower or slower link than the GPU supports: the slot, a riser, or BIOS "
                     "settings"
                   : "read under load"};
}

HealthRow power_row(const PowerLimits& power) {
  const bool capped = power.enforced_w < kLoweredSettingShare * power.default_w;
  return {"power limit", strprintf("%.0f W (default %.0f W)", power.enforced_w, power.default_w),
          capped ? "warn" : "ok", capped ? "capped below the model's default: lower clocks under load" : ""};
}

HealthRow sm_clock_row(const SmClocks& clocks) {
  if (!clocks.application_mhz)
    return {"SM clock", strprintf("max %.0f MHz", clocks.max_mhz), "info", "no applications clock reported"};
  const bool lowered = *clocks.application_mhz < kLoweredSettingShare * clocks.max_mhz;
  return {"SM clock", strprintf("applications %.0f MHz (max %.0f MHz)", *clocks.application_mhz, clocks.max_mhz),
          lowered ? "warn" : "ok",
          lowered ? "applications clock set below the maximum: slower kernels ('nvidia-smi -rac' resets it)" : ""};
}

HealthRow clock_limits_row(uint64_t reasons) {
  const bool held_down = (reasons & kClockEventsThatSlowTraining) != 0;
  const bool any = (reasons & ~kClockEventGpuIdle) != 0;
  return {"clock limits now", describe_clock_event_reasons(reasons),
          held_down ? "warn"
          : any     ? "info"
                    : "ok",
          held_down ? "the clocks are held down now (power, heat or the board); training runs slower" : ""};
}

HealthRow other_processes_row(unsigned others) {
  return {"other processes on this GPU", std::to_string(others), others > 0 ? "warn" : "ok",
          others > 0 ? "a shared GPU: other work competes for SMs and memory" : ""};
}

}  // namespace

std::string describe_clock_event_reasons(uint64_t mask) {
  std::string out;
  uint64_t named = kClockEventGpuIdle;
  for (const ClockEventWords& reason : kClockEventWords) {
    named |= reason.bit;
    if (mask & reason.bit) out += (out.empty() ? "" : ", ") + std::string(reason.words);
  }
  if (const uint64_t other = mask & ~named)
    out += (out.empty() ? "" : ", ") + strprintf("other (0x%llx)", static_cast<unsigned long long>(other));
  return out.empty() ? "none" : out;
}

unsigned count_other_processes(const std::vector<unsigned>& pids, unsigned own_pid) {
  const auto others =
      static_cast<unsigned>(std::count_if(pids.begin(), pids.end(), [&](unsigned pid) { return pid != own_pid; }));
  const bool own_listed = others < pids.size();
  return own_listed || pids.empty() ? others : others - 1;  // not listed: PIDs of another namespace
}

std::vector<HealthRow> nvml_health_rows(NvmlApi& nvml, const NvmlDevice& device, unsigned own_pid) {
  const NvmlDevice gpu{device.gpu, {}};
  std::vector<HealthRow> rows;
  // The link first: it is the reading that changes when the GPU stops working.
  if (const auto link = nvml.pcie_link(gpu)) rows.push_back(pcie_row(*link));
  if (const auto power = nvml.power_limits(gpu)) rows.push_back(power_row(*power));
  if (const auto clocks = nvml.sm_clocks(gpu)) rows.push_back(sm_clock_row(*clocks));
  if (const auto reasons = nvml.clock_event_reasons(gpu)) rows.push_back(clock_limits_row(*reasons));
  if (const auto others = nvml.other_compute_processes(device, own_pid)) rows.push_back(other_processes_row(*others));
  return rows;
}

std::optional<HealthRow> under_load_row(NvmlApi& nvml, const NvmlDevice& device) {
  const NvmlDevice gpu{device.gpu, {}};
  const std::optional<double> sm_mhz = nvml.sm_clock_mhz(gpu);
  const std::optional<double> watts = nvml.power_w(gpu);
  const std::optional<uint64_t> reasons = nvml.clock_event_reasons(gpu);
  if (!sm_mhz && !watts && !reasons) return std::nullopt;
  std::string value;
  auto append = [&](const std::string& part) { value += (value.empty() ? "" : ", ") + part; };
  if (sm_mhz) append(strprintf("SM %.0f MHz", *sm_mhz));
  if (watts) {
    const std::optional<PowerLimits> limits = nvml.power_limits(gpu);
    append(limits ? strprintf("%.0f W of %.0f W", *watts, limits->enforced_w) : strprintf("%.0f W", *watts));
  }
  if (reasons) append("clock limits: " + describe_clock_event_reasons(*reasons));
  const bool held_down = reasons && (*reasons & kClockEventsThatSlowTraining) != 0;
  return HealthRow{"under training load", value, held_down ? "warn" : "info",
                   held_down ? "read during the ResNet-50 steps: the clocks are held down (power, heat or the board)"
                             : "read during the ResNet-50 steps"};
}

}  // namespace rn50::monitor
