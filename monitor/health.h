// monitor/health.h: the doctor's GPU health rows from NVML (PCIe link, power limit, SM clock, clock limits, other
// processes) with their verdicts, and the helpers behind them.
#pragma once

// Torch-free and CUDA-free: everything goes through NvmlApi, so the verdicts are tested against a fake NVML.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "monitor/nvml.h"

namespace rn50::monitor {

// NVML's clock event reason bits (nvmlClocksEventReason*, nvmlClocksThrottleReasonHw*); nvml_real.cpp checks
// them against nvml.h.
inline constexpr uint64_t kClockEventGpuIdle = 0x1;
inline constexpr uint64_t kClockEventApplicationsClocksSetting = 0x2;
inline constexpr uint64_t kClockEventSwPowerCap = 0x4;
inline constexpr uint64_t kClockEventHwSlowdown = 0x8;
inline constexpr uint64_t kClockEventSyncBoost = 0x10;
inline constexpr uint64_t kClockEventSwThermalSlowdown = 0x20;
inline constexpr uint64_t kClockEventHwThermalSlowdown = 0x40;
inline constexpr uint64_t kClockEventHwPowerBrakeSlowdown = 0x80;
inline constexpr uint64_t kClockEventDisplayClockSetting = 0x100;

// The reasons in `mask` as words ("power cap, thermal (software)"). GPU idle is left out (it only says that nothing
// runs); bits newer than NVML 12 show as "other (0x...)"; "none" when nothing is left.
std::string describe_clock_event_reasons(uint64_t mask);

// How many of the processes NVML lists on a device are not this one. NVML gives host PIDs inside a container with
// its own PID namespace (drivers before about R560), so `own_pid` may be missing from `pids`; this process, which
// holds a CUDA context on the device, is one of them all the same.
unsigned count_other_processes(const std::vector<unsigned>& pids, unsigned own_pid);

struct HealthRow {
  std::string check, value, verdict, note;  // verdict: ok | warn | info
};

// The rows for `device` (a GPU or a MIG instance; link, power and clocks are those of its GPU), read now. Call it
// while the GPU works: an idle GPU may slow its PCIe link, and the PCIe row says it was read under load. A row is
// left out where NVML does not answer (not supported, no permission). Throws where NVML fails (NvmlApi).
std::vector<HealthRow> nvml_health_rows(NvmlApi& nvml, const NvmlDevice& device, unsigned own_pid);

// One row read while the GPU trains (the doctor calls it during its ResNet-50 steps): the SM clock, the power drawn
// against the enforced limit and the clock event reasons at that moment, where a power cap or heat shows; warns
// when the clocks are held down. nullopt where NVML answers none of them.
std::optional<HealthRow> under_load_row(NvmlApi& nvml, const NvmlDevice& device);

}  // namespace rn50::monitor
