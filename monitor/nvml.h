// monitor/nvml.h: NvmlApi, the NVIDIA Management Library calls rn50 needs, behind plain C++ types (fakeable in tests).
#pragma once

// No NVML or CUDA header here: mig.cpp, utilisation.cpp and their tests compile on machines without CUDA.
// The real implementation is monitor/nvml_real.cpp (CUDA builds); CPU builds get monitor/nvml_none.cpp.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

namespace rn50::monitor {

// A device as NVML numbers it: a whole GPU by NVML index (nvidia-smi's order, which ignores
// CUDA_VISIBLE_DEVICES), or one MIG instance on it by its slot (the index passed to
// nvmlDeviceGetMigDeviceHandleByIndex; slots may have holes).
struct NvmlDevice {
  unsigned gpu = 0;
  std::optional<unsigned> mig_slot;

  bool is_mig() const { return mig_slot.has_value(); }
  friend bool operator==(const NvmlDevice& a, const NvmlDevice& b) {
    return a.gpu == b.gpu && a.mig_slot == b.mig_slot;
  }
};

struct MigMode {
  bool current = false;  // MIG is on now
  bool pending = false;  // MIG will be on after the next GPU reset
};

struct UtilisationRates {
  double gpu_pct = 0;     // time one or more kernels ran, over NVML's last sample period
  double memory_pct = 0;  // time device memory was being read or written
};

struct MemoryInfo {
  uint64_t used_bytes = 0;
  uint64_t total_bytes = 0;
};

// Hopper GPM metrics over the interval between two samples; nullopt where the device did not report one.
struct GpmMetrics {
  std::optional<double> sm_util_pct;
  std::optional<double> sm_occupancy_pct;
  std::optional<double> tensor_util_pct;  // NVML_GPM_METRIC_ANY_TENSOR_UTIL
  std::optional<double> dram_bw_util_pct;
};

// The PCIe link now and the best this GPU and its slot allow (NVML's "max" is the lower of the two).
struct PcieLink {
  unsigned generation = 0, width = 0;
  unsigned max_generation = 0, max_width = 0;
};

struct PowerLimits {
  double enforced_w = 0;  // the limit the GPU holds to now
  double default_w = 0;   // the limit the GPU boots with
};

struct SmClocks {
  double max_mhz = 0;
  std::optional<double> application_mhz;  // nullopt where applications clocks are not supported or are gone
};

// NVML's product brand (nvmlBrandType_t's numbers, which nvml_real.cpp checks against nvml.h): what tells a
// data-center GPU, which CUDA's forward compatibility supports, from a GeForce, which it does not.
enum class GpuBrand : unsigned {
  kUnknown = 0,
  kQuadro = 1,
  kTesla = 2,
  kNvs = 3,
  kGrid = 4,
  kGeForce = 5,
  kTitan = 6,
  kNvidiaVapps = 7,
  kNvidiaVpc = 8,
  kNvidiaVcs = 9,
  kNvidiaVws = 10,
  kNvidiaCloudGaming = 11,
  kQuadroRtx = 12,
  kNvidiaRtx = 13,
  kNvidia = 14,
  kGeForceRtx = 15,
  kTitanRtx = 16,
};

// One GPM counter snapshot; what it holds belongs to the NvmlApi that made it.
class GpmSample {
 public:
  virtual ~GpmSample() = default;
};

// The NVML calls rn50 makes. Real failures (GPU lost, bad index, driver errors) throw std::runtime_error;
// answers that are normal on some devices (not supported, no permission, MIG instance) are std::nullopt.
// Implementations must be callable from one sampling thread while another thread uses them too (NVML is
// thread-safe).
class NvmlApi {
 public:
  virtual ~NvmlApi() = default;

  virtual unsigned device_count() = 0;  // whole GPUs
  virtual std::string name(const NvmlDevice& device) = 0;
  // nullopt where NVML gives no brand (a MIG instance: ask its GPU) or one newer than GpuBrand knows.
  virtual std::optional<GpuBrand> brand(const NvmlDevice& device) = 0;

  // The host's driver: its version as nvidia-smi prints it ("535.104.05"), and the CUDA version it supports (12020
  // for 12.2). NVML comes from the host's driver, never from CUDA's forward-compatibility libraries.
  virtual std::string driver_version() = 0;
  virtual std::optional<int> cuda_driver_version() = 0;
  // "GPU-xxxxxxxx-..." for a GPU, "MIG-xxxxxxxx-..." for a MIG instance (older drivers: "MIG-GPU-.../gi/ci").
  virtual std::string uuid(const NvmlDevice& device) = 0;

  // nullopt when the GPU does not support MIG at all.
  virtual std::optional<MigMode> mig_mode(unsigned gpu) = 0;
  virtual unsigned max_mig_device_count(unsigned gpu) = 0;
  // The MIG instance in `slot` (0 <= slot < max_mig_device_count), or nullopt for an empty slot.
  virtual std::optional<NvmlDevice> mig_device(unsigned gpu, unsigned slot) = 0;

  virtual std::optional<UtilisationRates> utilisation(const NvmlDevice& device) = 0;
  virtual std::optional<double> sm_clock_mhz(const NvmlDevice& device) = 0;
  virtual std::optional<double> power_w(const NvmlDevice& device) = 0;
  virtual std::optional<MemoryInfo> memory(const NvmlDevice& device) = 0;
  virtual std::optional<double> pcie_rx_kb_per_s(const NvmlDevice& device) = 0;
  virtual std::optional<double> pcie_tx_kb_per_s(const NvmlDevice& device) = 0;

  // Settings and state of a whole GPU (for a MIG instance, ask its GPU: NvmlDevice{device.gpu, {}}).
  // An idle GPU may lower its link generation to save power: read the link while the GPU works.
  virtual std::optional<PcieLink> pcie_link(const NvmlDevice& device) = 0;
  virtual std::optional<PowerLimits> power_limits(const NvmlDevice& device) = 0;
  virtual std::optional<SmClocks> sm_clocks(const NvmlDevice& device) = 0;
  // Why the clocks are below their maximum now: a mask of monitor/health.h's kClockEvent* bits.
  virtual std::optional<uint64_t> clock_event_reasons(const NvmlDevice& device) = 0;
  // Compute processes on the device other than `own_pid` (see count_other_processes in monitor/health.h); the caller
  // must hold a CUDA context on the device. For a MIG instance, the processes in that instance.
  virtual std::optional<unsigned> other_compute_processes(const NvmlDevice& device, unsigned own_pid) = 0;

  // Links between whole GPUs: whether NVML reports NVLink peer-to-peer between two (nullopt: it cannot say),
  // and how many of a GPU's NVLinks are active (nullopt: no NVLink support).
  virtual std::optional<bool> nvlink_between(unsigned gpu_a, unsigned gpu_b) = 0;
  virtual std::optional<unsigned> active_nvlinks(unsigned gpu) = 0;

  // GPM (Hopper and newer). Metrics need two samples taken at least 100 ms apart (NVML's refresh rate).
  virtual bool gpm_supported(const NvmlDevice& device) = 0;
  virtual std::unique_ptr<GpmSample> gpm_sample(const NvmlDevice& device) = 0;
  virtual GpmMetrics gpm_metrics(const GpmSample& earlier, const GpmSample& later) = 0;
};

// The real NVML, initialised for as long as the returned object lives; nullptr when NVML is unavailable
// (CPU build, no driver), with the reason in *why_not when why_not is not null.
std::unique_ptr<NvmlApi> open_nvml(std::string* why_not);

}  // namespace rn50::monitor
