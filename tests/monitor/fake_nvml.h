// tests/monitor/fake_nvml.h: FakeNvml, an in-memory NvmlApi whose GPUs, MIG instances and readings tests set directly.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "monitor/health.h"
#include "monitor/nvml.h"

namespace rn50::monitor::testing {

// What one device answers; nullopt plays NVML's "not supported".
struct FakeReadings {
  std::optional<UtilisationRates> utilisation;
  std::optional<double> sm_clock_mhz;
  std::optional<double> power_w;
  std::optional<MemoryInfo> memory;
  std::optional<double> pcie_rx_kb_per_s;
  std::optional<double> pcie_tx_kb_per_s;
  bool power_throws = false;  // plays a real NVML failure (e.g. GPU lost) on the power query
  std::optional<PcieLink> pcie_link;
  std::optional<PowerLimits> power_limits;
  std::optional<SmClocks> sm_clocks;
  std::optional<uint64_t> clock_event_reasons;
  std::optional<std::vector<unsigned>> compute_pids;  // the PIDs NVML lists as compute processes on the device
  // GPM: a sample captures `gpm`; the metrics of an interval are those captured by its later sample.
  bool gpm_supported = false;
  GpmMetrics gpm;
};

struct FakeMig {
  std::string uuid, name;
  FakeReadings readings;
};

struct FakeGpu {
  std::string name, uuid;
  std::optional<MigMode> mig_mode;  // nullopt: the GPU does not support MIG
  unsigned max_mig_devices = 7;
  std::map<unsigned, FakeMig> mig_slots;  // slot -> instance; absent slots are empty (NVML_ERROR_NOT_FOUND)
  FakeReadings readings;
  std::optional<unsigned> active_nvlinks;  // nullopt: no NVLink support
};

class FakeGpmSample final : public GpmSample {
 public:
  FakeGpmSample(int serial, GpmMetrics captured) : serial(serial), captured(std::move(captured)) {}
  const int serial;  // order of creation: checks that intervals pair consecutive samples
  const GpmMetrics captured;
};

class FakeNvml final : public NvmlApi {
 public:
  std::vector<FakeGpu> gpus;
  std::map<unsigned, GpuBrand> brands;             // NVML index -> brand; absent: NVML gives none
  std::string driver = "580.95.05";                // nvmlSystemGetDriverVersion
  std::optional<int> cuda_driver = 13000;          // nvmlSystemGetCudaDriverVersion
  std::vector<std::pair<int, int>> gpm_intervals;  // (earlier, later) serials passed to gpm_metrics
  std::atomic<int> utilisation_calls{0};
  std::atomic<int> pcie_rx_calls{0};  // read by tests while a sampler thread runs

  unsigned device_count() override { return static_cast<unsigned>(gpus.size()); }
  std::string name(const NvmlDevice& device) override {
    return device.is_mig() ? mig(device).name : gpu(device.gpu).name;
  }
  std::optional<GpuBrand> brand(const NvmlDevice& device) override {
    gpu(device.gpu);  // throws for a GPU the fake does not have, as NVML fails for a bad index
    const auto found = brands.find(device.gpu);
    if (device.is_mig() || found == brands.end()) return std::nullopt;
    return found->second;
  }
  std::string driver_version() override { return driver; }
  std::optional<int> cuda_driver_version() override { return cuda_driver; }
  std::string uuid(const NvmlDevice& device) override {
    return device.is_mig() ? mig(device).uuid : gpu(device.gpu).uuid;
  }
  std::optional<MigMode> mig_mode(unsigned index) override { return gpu(index).mig_mode; }
  unsigned max_mig_device_count(unsigned index) override {
    return gpu(index).mig_mode ? gpu(index).max_mig_devices : 0;
  }
  std::optional<NvmlDevice> mig_device(unsigned index, unsigned slot) override {
    const FakeGpu& g = gpu(index);
    if (slot >= g.max_mig_devices) throw std::runtime_error("fake NVML: MIG slot out of range");
    if (!g.mig_slots.count(slot)) return std::nullopt;
    return NvmlDevice{index, slot};
  }

  std::optional<UtilisationRates> utilisation(const NvmlDevice& device) override {
    ++utilisation_calls;
    return readings(device).utilisation;
  }
  std::optional<double> sm_clock_mhz(const NvmlDevice& device) override { return readings(device).sm_clock_mhz; }
  std::optional<double> power_w(const NvmlDevice& device) override {
    if (readings(device).power_throws) throw std::runtime_error("fake NVML: GPU is lost");
    return readings(device).power_w;
  }
  std::optional<MemoryInfo> memory(const NvmlDevice& device) override { return readings(device).memory; }
  std::optional<double> pcie_rx_kb_per_s(const NvmlDevice& device) override {
    ++pcie_rx_calls;
    return readings(device).pcie_rx_kb_per_s;
  }
  std::optional<double> pcie_tx_kb_per_s(const NvmlDevice& device) override {
    return readings(device).pcie_tx_kb_per_s;
  }

  std::optional<PcieLink> pcie_link(const NvmlDevice& device) override { return readings(device).pcie_link; }
  std::optional<PowerLimits> power_limits(const NvmlDevice& device) override { return readings(device).power_limits; }
  std::optional<SmClocks> sm_clocks(const NvmlDevice& device) override { return readings(device).sm_clocks; }
  std::optional<uint64_t> clock_event_reasons(const NvmlDevice& device) override {
    return readings(device).clock_event_reasons;
  }
  std::optional<unsigned> other_compute_processes(const NvmlDevice& device, unsigned own_pid) override {
    const auto& pids = readings(device).compute_pids;
    if (!pids) return std::nullopt;
    return count_other_processes(*pids, own_pid);
  }

  std::map<std::pair<unsigned, unsigned>, bool> nvlink;  // (lower, higher) NVML index; absent: NVML cannot say
  std::optional<bool> nvlink_between(unsigned a, unsigned b) override {
    const auto found = nvlink.find({std::min(a, b), std::max(a, b)});
    return found == nvlink.end() ? std::nullopt : std::optional<bool>(found->second);
  }
  bool nvlink_throws = false;  // plays an NVML failure on the link query
  std::optional<unsigned> active_nvlinks(unsigned index) override {
    if (nvlink_throws) throw std::runtime_error("fake NVML: link query failed");
    return gpu(index).active_nvlinks;
  }

  bool gpm_supported(const NvmlDevice& device) override { return readings(device).gpm_supported; }
  std::unique_ptr<GpmSample> gpm_sample(const NvmlDevice& device) override {
    return std::make_unique<FakeGpmSample>(next_serial_++, readings(device).gpm);
  }
  GpmMetrics gpm_metrics(const GpmSample& earlier, const GpmSample& later) override {
    const auto& first = dynamic_cast<const FakeGpmSample&>(earlier);
    const auto& second = dynamic_cast<const FakeGpmSample&>(later);
    gpm_intervals.emplace_back(first.serial, second.serial);
    return second.captured;
  }

  FakeReadings& readings(const NvmlDevice& device) {
    return device.is_mig() ? mig(device).readings : gpu(device.gpu).readings;
  }

 private:
  FakeGpu& gpu(unsigned index) {
    if (index >= gpus.size()) throw std::runtime_error("fake NVML: no GPU " + std::to_string(index));
    return gpus[index];
  }
  FakeMig& mig(const NvmlDevice& device) {
    auto found = gpu(device.gpu).mig_slots.find(*device.mig_slot);
    if (found == gpu(device.gpu).mig_slots.end()) throw std::runtime_error("fake NVML: empty MIG slot");
    return found->second;
  }
  int next_serial_ = 0;
};

}  // namespace rn50::monitor::testing
