// monitor/utilisation.h: UtilisationSampler, which samples one GPU's (or MIG instance's) NVML telemetry on its own
// thread and summarises each epoch as mean, 5th and 95th percentile per metric; plus CUDA UUID formatting.
#pragma once

// Torch-free and CUDA-free: everything goes through NvmlApi, so a fake drives the tests.

#include <array>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "monitor/nvml.h"

namespace rn50::monitor {

// Epoch-record extras: "<metric>_mean", "<metric>_p5", "<metric>_p95" for every metric, always in the same
// order; nullopt means unavailable (written as null, never 0).
using UtilisationSummary = std::vector<std::pair<std::string, std::optional<double>>>;

// The metrics, in summary order. The last four come from GPM (Hopper and newer).
inline constexpr std::array<const char*, 11> kUtilisationMetrics = {
    "gpu_util_pct",     // time a kernel was running (NVML utilisation rates)
    "mem_bw_util_pct",  // time device memory was being read or written
    "sm_clock_mhz",     "power_w",
    "mem_used_gib",      // device memory in use by every process, GiB (2^30 bytes)
    "pcie_rx_mbps",      // MB/s (NVML's KB/s / 1000) into the GPU
    "pcie_tx_mbps",      // MB/s out of the GPU
    "sm_util_pct",       // GPM: SMs busy
    "sm_occupancy_pct",  // GPM: active warps versus the theoretical maximum
    "tensor_util_pct",   // GPM: SMs doing any tensor-core work
    "dram_bw_util_pct",  // GPM: DRAM bandwidth used versus the maximum
};

// NVML's "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx" (lower-case hex) from cudaDeviceProp::uuid.bytes.
std::string format_cuda_uuid(const unsigned char bytes[16]);
std::string format_cuda_uuid(const char bytes[16]);  // cudaUUID_t::bytes is plain char

// The NVML device (GPU or MIG instance) whose UUID is `uuid`. Only the hex digits after the "GPU-"/"MIG-"
// prefix are compared, case-insensitively: CUDA reports a MIG instance's UUID bytes, which format_cuda_uuid
// writes with a "GPU-" prefix while NVML names the instance "MIG-...".
std::optional<NvmlDevice> find_device_by_uuid(NvmlApi& nvml, const std::string& uuid);

// The `percent`th percentile of ascending `sorted` (not empty) by linear interpolation between closest ranks
// (numpy's default): rank = (n - 1) * percent / 100.
double percentile_of_sorted(const std::vector<double>& sorted, int percent);

class UtilisationSampler {
 public:
  static constexpr std::chrono::milliseconds kDefaultPeriod{100};

  // Samples the device whose UUID is `device_uuid` (see find_device_by_uuid); throws std::runtime_error when
  // NVML has no such device. Nothing is sampled until start() (or sample_once()).
  UtilisationSampler(std::shared_ptr<NvmlApi> nvml, const std::string& device_uuid,
                     std::chrono::milliseconds period = kDefaultPeriod);
  ~UtilisationSampler();  // stops and joins the thread
  UtilisationSampler(const UtilisationSampler&) = delete;
  UtilisationSampler& operator=(const UtilisationSampler&) = delete;

  // Starts sampling every `period` on a background thread (no-op when running). A sample takes a millisecond or
  // two of NVML calls, and 40 ms more when it reads the PCIe counters (they block for 20 ms each): those are read
  // at most every 500 ms, GPM's at most every 100 ms. The period is kept from start to start.
  void start();
  // Stops the thread; returns once it has finished its current sample.
  void stop();

  // Takes one sample now (the thread calls this; tests call it directly, without start()). A failing NVML
  // query is logged once and counts as unavailable for that sample; it never stops sampling.
  void sample_once();

  // Summary of the samples since the previous call, then starts afresh. A metric without samples gives
  // nullopt for all three keys.
  UtilisationSummary take_epoch_summary();

  // The same keys, all nullopt: for CPU runs and runs without NVML, so epoch records always have the same keys.
  static UtilisationSummary unavailable_summary();

  // Each metric's mean over the samples since the previous call (or since the epoch's start), under the metric's
  // own name ("gpu_util_pct"); nullopt where there were none. It leaves the epoch's samples to take_epoch_summary:
  // the step records' utilisation, without a second copy of the samples.
  UtilisationSummary take_interval_means();
  static UtilisationSummary unavailable_interval_means();

  const NvmlDevice& device() const { return device_; }
  bool gpm_supported() const { return gpm_supported_; }
  size_t samples_taken() const;  // since construction

 private:
  using Values = std::array<std::optional<double>, kUtilisationMetrics.size()>;
  template <class Query>
  auto guarded(const char* what, Query query) -> decltype(query());
  void read_gpm(Values& values);
  void run();

  const std::shared_ptr<NvmlApi> nvml_;
  const NvmlDevice device_;
  const std::chrono::milliseconds period_;
  const bool gpm_supported_;
  const size_t gpm_every_;   // samples per GPM interval: NVML needs >= 100 ms between GPM samples
  const size_t pcie_every_;  // samples per PCIe counter read (500 ms)

  std::mutex sampling_mutex_;  // one sample_once at a time; guards the members below it
  std::unique_ptr<GpmSample> previous_gpm_;
  size_t samples_since_gpm_ = 0;
  size_t samples_since_pcie_ = 0;
  std::set<std::string> warned_;  // queries whose failure was already logged

  mutable std::mutex samples_mutex_;  // guards samples_ and samples_taken_
  std::array<std::vector<double>, kUtilisationMetrics.size()> samples_;
  std::array<size_t, kUtilisationMetrics.size()> interval_start_{};  // where take_interval_means continues
  size_t samples_taken_ = 0;

  std::mutex stop_mutex_;
  std::condition_variable stop_changed_;
  bool stop_requested_ = false;
  std::thread thread_;
};

}  // namespace rn50::monitor
