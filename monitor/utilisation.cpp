// monitor/utilisation.cpp: UtilisationSampler (background NVML sampling, per-epoch mean/p5/p95) and UUID helpers.
#include "monitor/utilisation.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <exception>
#include <numeric>
#include <stdexcept>

#include "core/log.h"

namespace rn50::monitor {
namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
constexpr std::chrono::milliseconds kGpmMinInterval{100};
// nvmlDeviceGetPcieThroughput counts bytes over 20 ms and blocks that long, per counter (NVML's documentation):
// with both in every 100 ms sample, a sample took 42 ms on the H200 (docs/utilisation.md), 40% of a core that a
// data-bound run needs for decoding. Every 500 ms they take about 8%.
constexpr std::chrono::milliseconds kPcieMinInterval{500};

size_t samples_per(std::chrono::milliseconds interval, std::chrono::milliseconds period) {
  return static_cast<size_t>((interval.count() + period.count() - 1) / period.count());
}

enum MetricIndex : size_t {
  kGpuUtil,
  kMemBwUtil,
  kSmClock,
  kPower,
  kMemUsed,
  kPcieRx,
  kPcieTx,
  kSmUtil,
  kSmOccupancy,
  kTensorUtil,
  kDramBwUtil,
};

// "GPU-ABC..." and "MIG-abc..." -> "abc...": the part that CUDA and NVML agree on.
std::string uuid_body(const std::string& uuid) {
  std::string body = uuid;
  for (const char* prefix : {"GPU-", "MIG-"})
    if (body.compare(0, 4, prefix) == 0) body = body.substr(4);
  std::transform(body.begin(), body.end(), body.begin(), [](unsigned char c) { return std::tolower(c); });
  return body;
}

}  // namespace

std::string format_cuda_uuid(const unsigned char bytes[16]) {
  std::string out = "GPU-";
  for (int i = 0; i < 16; ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) out += '-';
    out += strprintf("%02x", static_cast<unsigned>(bytes[i]));
  }
  return out;
}

std::string format_cuda_uuid(const char bytes[16]) {
  return format_cuda_uuid(reinterpret_cast<const unsigned char*>(bytes));
}

std::optional<NvmlDevice> find_device_by_uuid(NvmlApi& nvml, const std::string& uuid) {
  const std::string wanted = uuid_body(uuid);
  const unsigned count = nvml.device_count();
  for (unsigned gpu = 0; gpu < count; ++gpu) {
    const NvmlDevice whole{gpu, {}};
    if (uuid_body(nvml.uuid(whole)) == wanted) return whole;
  }
  for (unsigned gpu = 0; gpu < count; ++gpu) {
    const std::optional<MigMode> mode = nvml.mig_mode(gpu);
    if (!mode || !mode->current) continue;
    const unsigned slots = nvml.max_mig_device_count(gpu);
    for (unsigned slot = 0; slot < slots; ++slot) {
      const std::optional<NvmlDevice> mig = nvml.mig_device(gpu, slot);
      if (mig && uuid_body(nvml.uuid(*mig)) == wanted) return mig;
    }
  }
  return std::nullopt;
}

double percentile_of_sorted(const std::vector<double>& sorted, int percent) {
  if (sorted.empty()) throw std::invalid_argument("percentile_of_sorted: no values");
  const double rank = static_cast<double>(sorted.size() - 1) * percent / 100.0;
  const size_t below = static_cast<size_t>(std::floor(rank));
  const size_t above = std::min(below + 1, sorted.size() - 1);
  return sorted[below] + (sorted[above] - sorted[below]) * (rank - static_cast<double>(below));
}

UtilisationSampler::UtilisationSampler(std::shared_ptr<NvmlApi> nvml, const std::string& device_uuid,
                                       std::chrono::milliseconds period)
    : nvml_(std::move(nvml)),
      device_([&] {
        if (!nvml_) throw std::invalid_argument("UtilisationSampler needs an NvmlApi");
        const std::optional<NvmlDevice> device = find_device_by_uuid(*nvml_, device_uuid);
        if (!device) throw std::runtime_error("NVML has no device with UUID " + device_uuid);
        return *device;
      }()),
      period_(std::max(period, std::chrono::milliseconds(1))),
      gpm_supported_(nvml_->gpm_supported(device_)),
      gpm_every_(samples_per(kGpmMinInterval, period_)),
      pcie_every_(samples_per(kPcieMinInterval, period_)) {}

UtilisationSampler::~UtilisationSampler() { stop(); }

void UtilisationSampler::start() {
  if (thread_.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(stop_mutex_);
    stop_requested_ = false;
  }
  thread_ = std::thread(&UtilisationSampler::run, this);
}

void UtilisationSampler::stop() {
  {
    std::lock_guard<std::mutex> lock(stop_mutex_);
    stop_requested_ = true;
  }
  stop_changed_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void UtilisationSampler::run() {
  auto next = std::chrono::steady_clock::now();
  std::unique_lock<std::mutex> lock(stop_mutex_);
  while (!stop_requested_) {
    lock.unlock();
    try {
      sample_once();
    } catch (const std::exception& e) {  // not from NVML (guarded): out of memory and the like
      log_warn(std::string("GPU utilisation sampling stopped: ") + e.what());
      return;
    }
    lock.lock();
    next += period_;
    const auto now = std::chrono::steady_clock::now();
    if (next < now) next = now;  // fell behind: no burst of samples to catch up
    stop_changed_.wait_until(lock, next, [this] { return stop_requested_; });
  }
}

template <class Query>
auto UtilisationSampler::guarded(const char* what, Query query) -> decltype(query()) {
  try {
    return query();
  } catch (const std::exception& e) {
    if (warned_.insert(what).second)
      log_warn(strprintf("GPU utilisation: NVML %s failed; reported as unavailable: %s", what, e.what()));
    return {};
  }
}

void UtilisationSampler::read_gpm(Values& values) {
  if (!gpm_supported_) return;
  if (previous_gpm_ && ++samples_since_gpm_ < gpm_every_) return;
  std::unique_ptr<GpmSample> sample = guarded("GPM sample", [&] { return nvml_->gpm_sample(device_); });
  if (!sample) return;
  if (previous_gpm_) {
    const auto metrics =
        guarded("GPM metrics", [&] { return std::optional<GpmMetrics>(nvml_->gpm_metrics(*previous_gpm_, *sample)); });
    auto finite = [](const std::optional<double>& v) { return !v || std::isfinite(*v); };
    if (metrics && !(finite(metrics->sm_util_pct) && finite(metrics->sm_occupancy_pct) &&
                     finite(metrics->tensor_util_pct) && finite(metrics->dram_bw_util_pct))) {
      // On the H200 the runs whose DRAM-bandwidth metric came back NaN in some intervals also had SM utilisation
      // and occupancy about a quarter lower at the same speed: the whole interval is suspect, so none of its GPM
      // metrics is kept.
      if (warned_.insert("non-finite GPM").second)
        log_warn("GPU utilisation: an NVML GPM interval had a non-finite metric; such intervals are left out");
    } else if (metrics) {
      values[kSmUtil] = metrics->sm_util_pct;
      values[kSmOccupancy] = metrics->sm_occupancy_pct;
      values[kTensorUtil] = metrics->tensor_util_pct;
      values[kDramBwUtil] = metrics->dram_bw_util_pct;
    }
  }
  previous_gpm_ = std::move(sample);
  samples_since_gpm_ = 0;
}

void UtilisationSampler::sample_once() {
  Values values;
  {
    std::lock_guard<std::mutex> sampling(sampling_mutex_);
    if (const auto rates = guarded("utilisation rates", [&] { return nvml_->utilisation(device_); })) {
      values[kGpuUtil] = rates->gpu_pct;
      values[kMemBwUtil] = rates->memory_pct;
    }
    values[kSmClock] = guarded("SM clock", [&] { return nvml_->sm_clock_mhz(device_); });
    values[kPower] = guarded("power", [&] { return nvml_->power_w(device_); });
    if (const auto memory = guarded("memory", [&] { return nvml_->memory(device_); }))
      values[kMemUsed] = static_cast<double>(memory->used_bytes) / kGiB;
    if (samples_since_pcie_++ % pcie_every_ == 0) {
      if (const auto rx = guarded("PCIe rx", [&] { return nvml_->pcie_rx_kb_per_s(device_); }))
        values[kPcieRx] = *rx / 1000.0;
      if (const auto tx = guarded("PCIe tx", [&] { return nvml_->pcie_tx_kb_per_s(device_); }))
        values[kPcieTx] = *tx / 1000.0;
    }
    read_gpm(values);
    // One NaN (the H200's GPM DRAM-bandwidth metric returns them at times) would make the epoch's mean null: a
    // non-finite reading of any metric is left out, like a failed one.
    for (size_t metric = 0; metric < values.size(); ++metric) {
      if (!values[metric] || std::isfinite(*values[metric])) continue;
      values[metric].reset();
      if (warned_.insert(std::string("non-finite ") + kUtilisationMetrics[metric]).second)
        log_warn(strprintf("GPU utilisation: NVML gave a non-finite %s reading; such readings are left out",
                           kUtilisationMetrics[metric]));
    }
  }
  std::lock_guard<std::mutex> lock(samples_mutex_);
  for (size_t metric = 0; metric < values.size(); ++metric)
    if (values[metric]) samples_[metric].push_back(*values[metric]);
  ++samples_taken_;
}

size_t UtilisationSampler::samples_taken() const {
  std::lock_guard<std::mutex> lock(samples_mutex_);
  return samples_taken_;
}

UtilisationSummary UtilisationSampler::take_epoch_summary() {
  std::array<std::vector<double>, kUtilisationMetrics.size()> taken;
  {
    std::lock_guard<std::mutex> lock(samples_mutex_);
    std::swap(taken, samples_);
    interval_start_.fill(0);
  }
  UtilisationSummary summary;
  summary.reserve(3 * taken.size());
  for (size_t metric = 0; metric < taken.size(); ++metric) {
    std::vector<double>& values = taken[metric];
    const std::string name = kUtilisationMetrics[metric];
    if (values.empty()) {
      for (const char* suffix : {"_mean", "_p5", "_p95"}) summary.emplace_back(name + suffix, std::nullopt);
      continue;
    }
    std::sort(values.begin(), values.end());
    const double mean = std::accumulate(values.begin(), values.end(), 0.0) / static_cast<double>(values.size());
    summary.emplace_back(name + "_mean", mean);
    summary.emplace_back(name + "_p5", percentile_of_sorted(values, 5));
    summary.emplace_back(name + "_p95", percentile_of_sorted(values, 95));
  }
  return summary;
}

UtilisationSummary UtilisationSampler::unavailable_summary() {
  UtilisationSummary summary;
  for (const char* metric : kUtilisationMetrics)
    for (const char* suffix : {"_mean", "_p5", "_p95"})
      summary.emplace_back(std::string(metric) + suffix, std::nullopt);
  return summary;
}

UtilisationSummary UtilisationSampler::take_interval_means() {
  UtilisationSummary means;
  means.reserve(kUtilisationMetrics.size());
  std::lock_guard<std::mutex> lock(samples_mutex_);
  for (size_t metric = 0; metric < samples_.size(); ++metric) {
    const std::vector<double>& values = samples_[metric];
    const size_t from = interval_start_[metric];
    interval_start_[metric] = values.size();
    if (from >= values.size()) {
      means.emplace_back(kUtilisationMetrics[metric], std::nullopt);
      continue;
    }
    const double sum = std::accumulate(values.begin() + static_cast<std::ptrdiff_t>(from), values.end(), 0.0);
    means.emplace_back(kUtilisationMetrics[metric], sum / static_cast<double>(values.size() - from));
  }
  return means;
}

UtilisationSummary UtilisationSampler::unavailable_interval_means() {
  UtilisationSummary means;
  for (const char* metric : kUtilisationMetrics) means.emplace_back(metric, std::nullopt);
  return means;
}

}  // namespace rn50::monitor
