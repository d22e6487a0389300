// monitor/nvml_real.cpp: NvmlApi over the real NVML, opened at run time (CUDA builds only; nvml.h's types, no link).
#include <nvml.h>

#include <initializer_list>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/check.h"
#include "monitor/health.h"
#include "monitor/nvml.h"
#include "monitor/nvml_library.h"

// NVML 12.2 renamed the clock "throttle" reasons to "event" reasons (the hardware ones kept their old names) and
// deprecated the old query; older headers know only the old names.
#ifndef nvmlClocksEventReasonGpuIdle
#define nvmlDeviceGetCurrentClocksEventReasons nvmlDeviceGetCurrentClocksThrottleReasons
#define nvmlClocksEventReasonGpuIdle nvmlClocksThrottleReasonGpuIdle
#define nvmlClocksEventReasonApplicationsClocksSetting nvmlClocksThrottleReasonApplicationsClocksSetting
#define nvmlClocksEventReasonSwPowerCap nvmlClocksThrottleReasonSwPowerCap
#define nvmlClocksEventReasonSyncBoost nvmlClocksThrottleReasonSyncBoost
#define nvmlClocksEventReasonSwThermalSlowdown nvmlClocksThrottleReasonSwThermalSlowdown
#define nvmlClocksEventReasonDisplayClockSetting nvmlClocksThrottleReasonDisplayClockSetting
#endif

// monitor/health.h names the bits without nvml.h; they must be NVML's.
static_assert(rn50::monitor::kClockEventGpuIdle == nvmlClocksEventReasonGpuIdle);
static_assert(rn50::monitor::kClockEventApplicationsClocksSetting == nvmlClocksEventReasonApplicationsClocksSetting);
static_assert(rn50::monitor::kClockEventSwPowerCap == nvmlClocksEventReasonSwPowerCap);
#ifdef nvmlClocksThrottleReasonHwSlowdown  // a name a later NVML may rename too
static_assert(rn50::monitor::kClockEventHwSlowdown == nvmlClocksThrottleReasonHwSlowdown);
#endif
static_assert(rn50::monitor::kClockEventSyncBoost == nvmlClocksEventReasonSyncBoost);
static_assert(rn50::monitor::kClockEventSwThermalSlowdown == nvmlClocksEventReasonSwThermalSlowdown);
#ifdef nvmlClocksThrottleReasonHwThermalSlowdown  // a name a later NVML may rename too
static_assert(rn50::monitor::kClockEventHwThermalSlowdown == nvmlClocksThrottleReasonHwThermalSlowdown);
#endif
#ifdef nvmlClocksThrottleReasonHwPowerBrakeSlowdown  // a name a later NVML may rename too
static_assert(rn50::monitor::kClockEventHwPowerBrakeSlowdown == nvmlClocksThrottleReasonHwPowerBrakeSlowdown);
#endif
static_assert(rn50::monitor::kClockEventDisplayClockSetting == nvmlClocksEventReasonDisplayClockSetting);

// monitor/nvml.h numbers the brands without nvml.h; they must be NVML's.
static_assert(static_cast<unsigned>(rn50::monitor::GpuBrand::kQuadro) == NVML_BRAND_QUADRO);
static_assert(static_cast<unsigned>(rn50::monitor::GpuBrand::kTesla) == NVML_BRAND_TESLA);
static_assert(static_cast<unsigned>(rn50::monitor::GpuBrand::kGeForce) == NVML_BRAND_GEFORCE);
static_assert(static_cast<unsigned>(rn50::monitor::GpuBrand::kTitan) == NVML_BRAND_TITAN);
static_assert(static_cast<unsigned>(rn50::monitor::GpuBrand::kNvidiaVcs) == NVML_BRAND_NVIDIA_VCS);
static_assert(static_cast<unsigned>(rn50::monitor::GpuBrand::kQuadroRtx) == NVML_BRAND_QUADRO_RTX);
static_assert(static_cast<unsigned>(rn50::monitor::GpuBrand::kNvidiaRtx) == NVML_BRAND_NVIDIA_RTX);
static_assert(static_cast<unsigned>(rn50::monitor::GpuBrand::kNvidia) == NVML_BRAND_NVIDIA);
static_assert(static_cast<unsigned>(rn50::monitor::GpuBrand::kTitanRtx) == NVML_BRAND_TITAN_RTX);

// Every NVML function rn50 calls: X(function, required). They are found in the driver's library at the first
// open_nvml rather than linked, so that rn50 starts on hosts without the driver (a container run without --gpus, a
// CPU machine). Optional: GPM's (Hopper's metrics; a driver without them reports no GPM) and the applications clocks
// (deprecated in CUDA 13, to be removed in 14). Versioned names (nvmlDeviceGetComputeRunningProcesses_v3 and the
// like) come from nvml.h's macros: the member and the symbol looked up are the same expanded name.
#define RN50_NVML_FUNCTIONS(X)                      \
  X(nvmlInit_v2, true)                              \
  X(nvmlShutdown, true)                             \
  X(nvmlErrorString, true)                          \
  X(nvmlSystemGetDriverVersion, true)               \
  X(nvmlSystemGetCudaDriverVersion, true)           \
  X(nvmlDeviceGetCount_v2, true)                    \
  X(nvmlDeviceGetHandleByIndex_v2, true)            \
  X(nvmlDeviceGetName, true)                        \
  X(nvmlDeviceGetBrand, true)                       \
  X(nvmlDeviceGetUUID, true)                        \
  X(nvmlDeviceGetMigMode, true)                     \
  X(nvmlDeviceGetMaxMigDeviceCount, true)           \
  X(nvmlDeviceGetMigDeviceHandleByIndex, true)      \
  X(nvmlDeviceGetGpuInstanceId, true)               \
  X(nvmlDeviceGetUtilizationRates, true)            \
  X(nvmlDeviceGetClockInfo, true)                   \
  X(nvmlDeviceGetPowerUsage, true)                  \
  X(nvmlDeviceGetMemoryInfo, true)                  \
  X(nvmlDeviceGetPcieThroughput, true)              \
  X(nvmlDeviceGetCurrPcieLinkGeneration, true)      \
  X(nvmlDeviceGetCurrPcieLinkWidth, true)           \
  X(nvmlDeviceGetMaxPcieLinkGeneration, true)       \
  X(nvmlDeviceGetMaxPcieLinkWidth, true)            \
  X(nvmlDeviceGetEnforcedPowerLimit, true)          \
  X(nvmlDeviceGetPowerManagementDefaultLimit, true) \
  X(nvmlDeviceGetMaxClockInfo, true)                \
  X(nvmlDeviceGetApplicationsClock, false)          \
  X(nvmlDeviceGetCurrentClocksEventReasons, true)   \
  X(nvmlDeviceGetComputeRunningProcesses, true)     \
  X(nvmlDeviceGetP2PStatus, true)                   \
  X(nvmlDeviceGetNvLinkState, true)                 \
  X(nvmlGpmQueryDeviceSupport, false)               \
  X(nvmlGpmSampleAlloc, false)                      \
  X(nvmlGpmSampleFree, false)                       \
  X(nvmlGpmSampleGet, false)                        \
  X(nvmlGpmMigSampleGet, false)                     \
  X(nvmlGpmMetricsGet, false)

// The name after nvml.h's macros (#function alone would give the unversioned name).
#define RN50_NVML_NAME_(function) #function
#define RN50_NVML_NAME(function) RN50_NVML_NAME_(function)

namespace rn50::monitor {
namespace {

// NVML's functions as pointers, each typed as nvml.h declares it; nullptr for an optional one the driver lacks.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"  // the applications clocks' declaration (CUDA 13.1)
struct NvmlFunctions {
#define RN50_NVML_MEMBER(function, required) decltype(&::function) function = nullptr;
  RN50_NVML_FUNCTIONS(RN50_NVML_MEMBER)
#undef RN50_NVML_MEMBER
};
#pragma GCC diagnostic pop

// The driver's library, opened once at the first use and kept for the process (NVML's own reference count is
// nvmlInit_v2's and nvmlShutdown's); the reason it could not be, for every later open_nvml.
struct LoadedNvml {
  std::optional<NvmlLibrary> library;
  NvmlFunctions functions;
  std::string why_not;
};

const LoadedNvml& loaded_nvml() {
  static const LoadedNvml loaded = [] {
    LoadedNvml nvml;
#define RN50_NVML_SYMBOL(function, required) NvmlSymbol{RN50_NVML_NAME(function), required},
    nvml.library = load_nvml_library({RN50_NVML_FUNCTIONS(RN50_NVML_SYMBOL)}, &nvml.why_not);
#undef RN50_NVML_SYMBOL
    if (!nvml.library) return nvml;
    size_t i = 0;
#define RN50_NVML_ASSIGN(function, required) \
  nvml.functions.function = reinterpret_cast<decltype(nvml.functions.function)>(nvml.library->addresses.at(i++));
    RN50_NVML_FUNCTIONS(RN50_NVML_ASSIGN)
#undef RN50_NVML_ASSIGN
    return nvml;
  }();
  return loaded;
}

// The functions of a library that loaded (open_nvml returns no NvmlApi otherwise).
const NvmlFunctions& nvml() { return loaded_nvml().functions; }

}  // namespace
}  // namespace rn50::monitor

namespace rn50::monitor {
namespace {

// Returns `status` when it is NVML_SUCCESS or one of `normal_answers`; throws for anything else.
nvmlReturn_t check_nvml(nvmlReturn_t status, const char* expr, const char* file, int line,
                        std::initializer_list<nvmlReturn_t> normal_answers) {
  if (status == NVML_SUCCESS) return status;
  for (const nvmlReturn_t answer : normal_answers)
    if (status == answer) return status;
  throw_call_failed(expr, file, line, nvml().nvmlErrorString(status));
}

}  // namespace
}  // namespace rn50::monitor

// The one check for every NVML call: yields the call's status when it is NVML_SUCCESS or one of the statuses
// listed after the call (answers that are normal for that query, e.g. NVML_ERROR_NOT_SUPPORTED); any other
// status throws std::runtime_error naming file, line, expression and nvmlErrorString.
#define RN50_NVML_CHECK(expr, ...) ::rn50::monitor::check_nvml((expr), #expr, __FILE__, __LINE__, {__VA_ARGS__})

namespace rn50::monitor {
namespace {

class RealGpmSample final : public GpmSample {
 public:
  RealGpmSample() { RN50_NVML_CHECK(nvml().nvmlGpmSampleAlloc(&sample_)); }
  ~RealGpmSample() override { nvml().nvmlGpmSampleFree(sample_); }
  RealGpmSample(const RealGpmSample&) = delete;
  RealGpmSample& operator=(const RealGpmSample&) = delete;
  nvmlGpmSample_t get() const { return sample_; }

 private:
  nvmlGpmSample_t sample_ = nullptr;
};

// Owns one reference of NVML's initialisation (nvmlInit_v2 is reference counted, so several can coexist).
class RealNvml final : public NvmlApi {
 public:
  RealNvml() = default;  // open_nvml has called nvmlInit_v2 for this object
  ~RealNvml() override { nvml().nvmlShutdown(); }
  RealNvml(const RealNvml&) = delete;
  RealNvml& operator=(const RealNvml&) = delete;

  unsigned device_count() override {
    unsigned count = 0;
    RN50_NVML_CHECK(nvml().nvmlDeviceGetCount_v2(&count));
    return count;
  }

  std::string name(const NvmlDevice& device) override {
    char buffer[NVML_DEVICE_NAME_V2_BUFFER_SIZE] = {};
    RN50_NVML_CHECK(nvml().nvmlDeviceGetName(handle(device), buffer, sizeof buffer));
    return buffer;
  }

  std::optional<GpuBrand> brand(const NvmlDevice& device) override {
    nvmlBrandType_t brand{};
    if (!answered(RN50_NVML_CHECK(nvml().nvmlDeviceGetBrand(handle(device), &brand), NVML_ERROR_NOT_SUPPORTED)))
      return std::nullopt;
    if (static_cast<unsigned>(brand) > static_cast<unsigned>(GpuBrand::kTitanRtx)) return std::nullopt;
    return static_cast<GpuBrand>(brand);
  }

  std::string driver_version() override {
    char buffer[NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE] = {};
    RN50_NVML_CHECK(nvml().nvmlSystemGetDriverVersion(buffer, sizeof buffer));
    return buffer;
  }

  // nvmlSystemGetCudaDriverVersion, not _v2 (which asks the libcuda this process loads, the forward-compatibility
  // one where it is in use).
  std::optional<int> cuda_driver_version() override {
    int version = 0;
    if (!answered(RN50_NVML_CHECK(nvml().nvmlSystemGetCudaDriverVersion(&version), NVML_ERROR_NOT_SUPPORTED)) ||
        version <= 0)
      return std::nullopt;
    return version;
  }

  std::string uuid(const NvmlDevice& device) override {
    char buffer[NVML_DEVICE_UUID_V2_BUFFER_SIZE] = {};
    RN50_NVML_CHECK(nvml().nvmlDeviceGetUUID(handle(device), buffer, sizeof buffer));
    return buffer;
  }

  std::optional<MigMode> mig_mode(unsigned gpu) override {
    unsigned current = 0, pending = 0;
    if (!answered(RN50_NVML_CHECK(nvml().nvmlDeviceGetMigMode(gpu_handle(gpu), &current, &pending),
                                  NVML_ERROR_NOT_SUPPORTED)))
      return std::nullopt;  // a GPU without MIG
    return MigMode{current == NVML_DEVICE_MIG_ENABLE, pending == NVML_DEVICE_MIG_ENABLE};
  }

  unsigned max_mig_device_count(unsigned gpu) override {
    unsigned count = 0;
    if (!answered(
            RN50_NVML_CHECK(nvml().nvmlDeviceGetMaxMigDeviceCount(gpu_handle(gpu), &count), NVML_ERROR_NOT_SUPPORTED)))
      return 0;
    return count;
  }

  std::optional<NvmlDevice> mig_device(unsigned gpu, unsigned slot) override {
    nvmlDevice_t mig = nullptr;
    if (!answered(RN50_NVML_CHECK(nvml().nvmlDeviceGetMigDeviceHandleByIndex(gpu_handle(gpu), slot, &mig),
                                  NVML_ERROR_NOT_FOUND)))
      return std::nullopt;  // an empty slot
    return NvmlDevice{gpu, slot};
  }

  std::optional<UtilisationRates> utilisation(const NvmlDevice& device) override {
    nvmlUtilization_t rates{};
    if (!answered(RN50_NVML_CHECK(nvml().nvmlDeviceGetUtilizationRates(handle(device), &rates),
                                  NVML_ERROR_NOT_SUPPORTED, NVML_ERROR_NO_PERMISSION)))
      return std::nullopt;
    return UtilisationRates{static_cast<double>(rates.gpu), static_cast<double>(rates.memory)};
  }

  std::optional<double> sm_clock_mhz(const NvmlDevice& device) override {
    unsigned mhz = 0;
    if (!answered(RN50_NVML_CHECK(nvml().nvmlDeviceGetClockInfo(handle(device), NVML_CLOCK_SM, &mhz),
                                  NVML_ERROR_NOT_SUPPORTED, NVML_ERROR_NO_PERMISSION)))
      return std::nullopt;
    return static_cast<double>(mhz);
  }

  std::optional<double> power_w(const NvmlDevice& device) override {
    unsigned milliwatts = 0;
    if (!answered(RN50_NVML_CHECK(nvml().nvmlDeviceGetPowerUsage(handle(device), &milliwatts), NVML_ERROR_NOT_SUPPORTED,
                                  NVML_ERROR_NO_PERMISSION)))
      return std::nullopt;
    return milliwatts / 1000.0;
  }

  std::optional<MemoryInfo> memory(const NvmlDevice& device) override {
    nvmlMemory_t memory{};
    if (!answered(RN50_NVML_CHECK(nvml().nvmlDeviceGetMemoryInfo(handle(device), &memory), NVML_ERROR_NOT_SUPPORTED,
                                  NVML_ERROR_NO_PERMISSION)))
      return std::nullopt;
    return MemoryInfo{memory.used, memory.total};
  }

  // Each PCIe query blocks for NVML's 20 ms counting window.
  std::optional<double> pcie_rx_kb_per_s(const NvmlDevice& device) override {
    return pcie_throughput(device, NVML_PCIE_UTIL_RX_BYTES);
  }
  std::optional<double> pcie_tx_kb_per_s(const NvmlDevice& device) override {
    return pcie_throughput(device, NVML_PCIE_UTIL_TX_BYTES);
  }

  std::optional<PcieLink> pcie_link(const NvmlDevice& device) override {
    const nvmlDevice_t gpu = handle(device);
    PcieLink link;
    if (!answered(RN50_NVML_CHECK(nvml().nvmlDeviceGetCurrPcieLinkGeneration(gpu, &link.generation),
                                  NVML_ERROR_NOT_SUPPORTED, NVML_ERROR_NO_PERMISSION)) ||
        !answered(RN50_NVML_CHECK(nvml().nvmlDeviceGetCurrPcieLinkWidth(gpu, &link.width), NVML_ERROR_NOT_SUPPORTED,
                                  NVML_ERROR_NO_PERMISSION)) ||
        !answered(RN50_NVML_CHECK(nvml().nvmlDeviceGetMaxPcieLinkGeneration(gpu, &link.max_generation),
                                  NVML_ERROR_NOT_SUPPORTED, NVML_ERROR_NO_PERMISSION)) ||
        !answered(RN50_NVML_CHECK(nvml().nvmlDeviceGetMaxPcieLinkWidth(gpu, &link.max_width), NVML_ERROR_NOT_SUPPORTED,
                                  NVML_ERROR_NO_PERMISSION)))
      return std::nullopt;
    return link;
  }

  std::optional<PowerLimits> power_limits(const NvmlDevice& device) override {
    const nvmlDevice_t gpu = handle(device);
    unsigned enforced_mw = 0, default_mw = 0;
    if (!answered(RN50_NVML_CHECK(nvml().nvmlDeviceGetEnforcedPowerLimit(gpu, &enforced_mw), NVML_ERROR_NOT_SUPPORTED,
                                  NVML_ERROR_NO_PERMISSION)) ||
        !answered(RN50_NVML_CHECK(nvml().nvmlDeviceGetPowerManagementDefaultLimit(gpu, &default_mw),
                                  NVML_ERROR_NOT_SUPPORTED, NVML_ERROR_NO_PERMISSION)))
      return std::nullopt;
    return PowerLimits{enforced_mw / 1000.0, default_mw / 1000.0};
  }

  std::optional<SmClocks> sm_clocks(const NvmlDevice& device) override {
    const nvmlDevice_t gpu = handle(device);
    unsigned max_mhz = 0, application_mhz = 0;
    if (!answered(RN50_NVML_CHECK(nvml().nvmlDeviceGetMaxClockInfo(gpu, NVML_CLOCK_SM, &max_mhz),
                                  NVML_ERROR_NOT_SUPPORTED, NVML_ERROR_NO_PERMISSION)))
      return std::nullopt;
    SmClocks clocks{static_cast<double>(max_mhz), std::nullopt};
    // Applications clocks are deprecated from CUDA 13.0 (compiler warnings from 13.1) and to be removed in 14.0,
    // where the driver answers NVML_ERROR_DEPRECATED; until then they are the setting that can lower the clock.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
    if (!nvml().nvmlDeviceGetApplicationsClock) return clocks;  // a driver that no longer has them
    const nvmlReturn_t status =
        RN50_NVML_CHECK(nvml().nvmlDeviceGetApplicationsClock(gpu, NVML_CLOCK_SM, &application_mhz),
                        NVML_ERROR_NOT_SUPPORTED, NVML_ERROR_NO_PERMISSION, NVML_ERROR_DEPRECATED);
#pragma GCC diagnostic pop
    if (answered(status)) clocks.application_mhz = application_mhz;
    return clocks;
  }

  std::optional<uint64_t> clock_event_reasons(const NvmlDevice& device) override {
    unsigned long long reasons = 0;
    if (!answered(RN50_NVML_CHECK(nvml().nvmlDeviceGetCurrentClocksEventReasons(handle(device), &reasons),
                                  NVML_ERROR_NOT_SUPPORTED, NVML_ERROR_NO_PERMISSION)))
      return std::nullopt;
    return static_cast<uint64_t>(reasons);
  }

  std::optional<unsigned> other_compute_processes(const NvmlDevice& device, unsigned own_pid) override {
    const nvmlDevice_t gpu = handle(device);
    std::vector<nvmlProcessInfo_t> processes(8);
    for (;;) {
      unsigned count = static_cast<unsigned>(processes.size());
      const nvmlReturn_t status =
          RN50_NVML_CHECK(nvml().nvmlDeviceGetComputeRunningProcesses(gpu, &count, processes.data()),
                          NVML_ERROR_INSUFFICIENT_SIZE, NVML_ERROR_NOT_SUPPORTED, NVML_ERROR_NO_PERMISSION);
      if (status == NVML_ERROR_INSUFFICIENT_SIZE) {
        processes.resize(count + 8);  // `count` is what NVML needs now; processes may start before the next call
        continue;
      }
      if (!answered(status)) return std::nullopt;
      std::vector<unsigned> pids;
      for (unsigned i = 0; i < count; ++i) pids.push_back(processes[i].pid);
      return count_other_processes(pids, own_pid);
    }
  }

  // GPM is a property of the whole GPU; a MIG instance is sampled through its parent and GPU instance id.
  bool gpm_supported(const NvmlDevice& device) override {
    const NvmlFunctions& f = nvml();
    if (!f.nvmlGpmQueryDeviceSupport || !f.nvmlGpmSampleAlloc || !f.nvmlGpmSampleFree || !f.nvmlGpmSampleGet ||
        !f.nvmlGpmMigSampleGet || !f.nvmlGpmMetricsGet)
      return false;  // a driver older than GPM
    nvmlGpmSupport_t support{};
    support.version = NVML_GPM_SUPPORT_VERSION;
    if (!answered(RN50_NVML_CHECK(nvml().nvmlGpmQueryDeviceSupport(gpu_handle(device.gpu), &support),
                                  NVML_ERROR_NOT_SUPPORTED)))
      return false;
    return support.isSupportedDevice != 0;
  }

  std::unique_ptr<GpmSample> gpm_sample(const NvmlDevice& device) override {
    auto sample = std::make_unique<RealGpmSample>();
    if (device.is_mig()) {
      unsigned gpu_instance = 0;
      RN50_NVML_CHECK(nvml().nvmlDeviceGetGpuInstanceId(handle(device), &gpu_instance));
      RN50_NVML_CHECK(nvml().nvmlGpmMigSampleGet(gpu_handle(device.gpu), gpu_instance, sample->get()));
    } else {
      RN50_NVML_CHECK(nvml().nvmlGpmSampleGet(gpu_handle(device.gpu), sample->get()));
    }
    return sample;
  }

  GpmMetrics gpm_metrics(const GpmSample& earlier, const GpmSample& later) override {
    static constexpr nvmlGpmMetricId_t kIds[] = {NVML_GPM_METRIC_SM_UTIL, NVML_GPM_METRIC_SM_OCCUPANCY,
                                                 NVML_GPM_METRIC_ANY_TENSOR_UTIL, NVML_GPM_METRIC_DRAM_BW_UTIL};
    constexpr unsigned kCount = sizeof kIds / sizeof kIds[0];
    // The request holds NVML_GPM_METRIC_MAX entries (several KiB): on the heap, zeroed.
    auto request = std::make_unique<nvmlGpmMetricsGet_t>();
    request->version = NVML_GPM_METRICS_GET_VERSION;
    request->numMetrics = kCount;
    request->sample1 = dynamic_cast<const RealGpmSample&>(earlier).get();
    request->sample2 = dynamic_cast<const RealGpmSample&>(later).get();
    for (unsigned i = 0; i < kCount; ++i) request->metrics[i].metricId = kIds[i];
    RN50_NVML_CHECK(nvml().nvmlGpmMetricsGet(request.get()));
    auto value = [&](unsigned i) -> std::optional<double> {
      if (request->metrics[i].nvmlReturn != NVML_SUCCESS) return std::nullopt;  // this metric only
      return request->metrics[i].value;
    };
    return GpmMetrics{value(0), value(1), value(2), value(3)};
  }

 private:
  std::optional<bool> nvlink_between(unsigned gpu_a, unsigned gpu_b) override {
    nvmlGpuP2PStatus_t status{};
    if (!answered(RN50_NVML_CHECK(
            nvml().nvmlDeviceGetP2PStatus(gpu_handle(gpu_a), gpu_handle(gpu_b), NVML_P2P_CAPS_INDEX_NVLINK, &status),
            NVML_ERROR_NOT_SUPPORTED))) {
      return std::nullopt;
    }
    return status == NVML_P2P_STATUS_OK;
  }

  std::optional<unsigned> active_nvlinks(unsigned gpu) override {
    unsigned active = 0;
    for (unsigned link = 0; link < NVML_NVLINK_MAX_LINKS; ++link) {
      nvmlEnableState_t state{};
      // NOT_SUPPORTED on link 0: no NVLink at all; INVALID_ARGUMENT: past this GPU's last link.
      const nvmlReturn_t status = RN50_NVML_CHECK(nvml().nvmlDeviceGetNvLinkState(gpu_handle(gpu), link, &state),
                                                  NVML_ERROR_NOT_SUPPORTED, NVML_ERROR_INVALID_ARGUMENT);
      if (status == NVML_ERROR_NOT_SUPPORTED && link == 0) return std::nullopt;
      if (!answered(status)) break;
      if (state == NVML_FEATURE_ENABLED) ++active;
    }
    return active;
  }

  static bool answered(nvmlReturn_t status) { return status == NVML_SUCCESS; }

  nvmlDevice_t gpu_handle(unsigned gpu) {
    nvmlDevice_t device = nullptr;
    RN50_NVML_CHECK(nvml().nvmlDeviceGetHandleByIndex_v2(gpu, &device));
    return device;
  }

  nvmlDevice_t handle(const NvmlDevice& device) {
    nvmlDevice_t gpu = gpu_handle(device.gpu);
    if (!device.is_mig()) return gpu;
    nvmlDevice_t mig = nullptr;
    RN50_NVML_CHECK(nvml().nvmlDeviceGetMigDeviceHandleByIndex(gpu, *device.mig_slot, &mig));
    return mig;
  }

  std::optional<double> pcie_throughput(const NvmlDevice& device, nvmlPcieUtilCounter_t counter) {
    unsigned kb_per_s = 0;
    if (!answered(RN50_NVML_CHECK(nvml().nvmlDeviceGetPcieThroughput(handle(device), counter, &kb_per_s),
                                  NVML_ERROR_NOT_SUPPORTED, NVML_ERROR_NO_PERMISSION)))
      return std::nullopt;
    return static_cast<double>(kb_per_s);
  }
};

}  // namespace

std::unique_ptr<NvmlApi> open_nvml(std::string* why_not) {
  const LoadedNvml& loaded = loaded_nvml();
  if (!loaded.library) {
    if (why_not) *why_not = loaded.why_not;
    return nullptr;
  }
  const nvmlReturn_t status = nvml().nvmlInit_v2();
  if (status != NVML_SUCCESS) {
    if (why_not) *why_not = std::string("nvmlInit_v2 failed: ") + nvml().nvmlErrorString(status);
    return nullptr;
  }
  return std::make_unique<RealNvml>();
}

}  // namespace rn50::monitor
