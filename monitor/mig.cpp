// monitor/mig.cpp: MIG instance listing, --mig selection and CUDA_VISIBLE_DEVICES, over NvmlApi.
#include "monitor/mig.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

#include "core/errors.h"
#include "core/log.h"

namespace rn50::monitor {
namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

[[noreturn]] void mig_error(const std::string& message) { throw ConfigError("config key 'mig': " + message); }

std::string gpu_label(NvmlApi& nvml, unsigned gpu) {
  return strprintf("GPU %u (%s)", gpu, nvml.name({gpu, {}}).c_str());
}

unsigned checked_gpu(NvmlApi& nvml, int gpu) {
  const unsigned count = nvml.device_count();
  if (gpu < 0 || static_cast<unsigned>(gpu) >= count)
    mig_error(strprintf("GPU %d does not exist (NVML sees %u GPU%s)", gpu, count, count == 1 ? "" : "s"));
  return static_cast<unsigned>(gpu);
}

// What keeps a GPU's MIG instances from being used, or nullopt when there is none; `instances` is filled
// when MIG is on. The same sentences serve `--mig list` and the errors of select_mig.
std::optional<std::string> mig_problem(NvmlApi& nvml, unsigned gpu, std::vector<MigInstance>& instances) {
  const std::string label = gpu_label(nvml, gpu);
  const std::optional<MigMode> mode = nvml.mig_mode(gpu);
  if (!mode) return label + " does not support MIG";
  if (!mode->current && mode->pending)
    return strprintf(
        "MIG on %s is enabled but waits for a GPU reset, which an administrator does with "
        "'nvidia-smi -i %u -r' (no process may use the GPU); rn50 never changes MIG settings",
        label.c_str(), gpu);
  if (!mode->current)
    return strprintf(
        "MIG is disabled on %s; an administrator enables it with 'nvidia-smi -i %u -mig 1' and "
        "creates instances with 'nvidia-smi mig -i %u -cgi <profiles> -C'; rn50 never changes MIG "
        "settings",
        label.c_str(), gpu, gpu);
  instances = list_mig_instances(nvml, gpu);
  if (instances.empty())
    return strprintf(
        "MIG is enabled on %s but it has no MIG instances; an administrator creates them with "
        "'nvidia-smi mig -i %u -cgi <profiles> -C'",
        label.c_str(), gpu);
  return std::nullopt;
}

std::string lower(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(), [](unsigned char c) { return std::tolower(c); });
  return text;
}

std::string known_uuids(const std::vector<MigInstance>& instances) {
  std::string out;
  for (const MigInstance& instance : instances)
    out += (out.empty() ? "" : ", ") + instance.uuid + strprintf(" (index %u)", instance.index);
  return out;
}

std::string pad(const std::string& text, size_t width) { return text + std::string(width - text.size(), ' '); }

}  // namespace

std::vector<MigInstance> list_mig_instances(NvmlApi& nvml, unsigned gpu) {
  std::vector<MigInstance> instances;
  const std::optional<MigMode> mode = nvml.mig_mode(gpu);
  if (!mode || !mode->current) return instances;
  const unsigned slots = nvml.max_mig_device_count(gpu);
  for (unsigned slot = 0; slot < slots; ++slot) {
    const std::optional<NvmlDevice> device = nvml.mig_device(gpu, slot);
    if (!device) continue;  // an empty slot: instances need not be contiguous
    std::optional<uint64_t> memory_bytes;
    if (const auto memory = nvml.memory(*device)) memory_bytes = memory->total_bytes;
    instances.push_back(MigInstance{static_cast<unsigned>(instances.size()), *device, nvml.uuid(*device),
                                    nvml.name(*device), memory_bytes});
  }
  return instances;
}

std::string describe_mig(NvmlApi& nvml, int gpu_index) {
  const unsigned gpu = checked_gpu(nvml, gpu_index);
  std::vector<MigInstance> instances;
  if (const auto problem = mig_problem(nvml, gpu, instances)) return *problem;

  const std::optional<MigMode> mode = nvml.mig_mode(gpu);
  std::string out = strprintf("%s: MIG enabled, %zu instance%s%s", gpu_label(nvml, gpu).c_str(), instances.size(),
                              instances.size() == 1 ? "" : "s",
                              mode && !mode->pending ? " (MIG will be disabled at the next GPU reset)" : "");
  std::vector<std::vector<std::string>> rows = {{"index", "uuid", "name", "memory"}};
  for (const MigInstance& instance : instances)
    rows.push_back({std::to_string(instance.index), instance.uuid, instance.name,
                    instance.memory_bytes ? strprintf("%.1f GiB", static_cast<double>(*instance.memory_bytes) / kGiB)
                                          : "unknown"});
  std::vector<size_t> widths(rows.front().size(), 0);
  for (const auto& row : rows)
    for (size_t column = 0; column < row.size(); ++column)
      widths[column] = std::max(widths[column], row[column].size());
  for (const auto& row : rows) {
    std::string line = " ";
    for (size_t column = 0; column + 1 < row.size(); ++column) line += " " + pad(row[column], widths[column]) + " ";
    out += "\n" + line + " " + row.back();
  }
  return out;
}

std::string select_mig(NvmlApi& nvml, int gpu_index, const std::string& spec) {
  const unsigned gpu = checked_gpu(nvml, gpu_index);
  std::vector<MigInstance> instances;
  if (const auto problem = mig_problem(nvml, gpu, instances)) mig_error(*problem);

  if (lower(spec.substr(0, 4)) == "mig-") {
    for (const MigInstance& instance : instances)
      if (lower(instance.uuid) == lower(spec)) return instance.uuid;
    mig_error(strprintf("no MIG instance '%s' on GPU %u; its instances are %s", spec.c_str(), gpu,
                        known_uuids(instances).c_str()));
  }
  const bool is_index = !spec.empty() && spec.size() <= 9 &&
                        std::all_of(spec.begin(), spec.end(), [](unsigned char c) { return std::isdigit(c); });
  if (!is_index)
    mig_error(
        strprintf("'%s' is neither a MIG instance UUID (MIG-...) nor an instance index; '--mig list' shows "
                  "them",
                  spec.c_str()));
  const unsigned long index = std::stoul(spec);
  if (index >= instances.size())
    mig_error(strprintf("index %lu is out of range: GPU %u has %zu MIG instance%s (0 to %zu)", index, gpu,
                        instances.size(), instances.size() == 1 ? "" : "s", instances.size() - 1));
  return instances[index].uuid;
}

void check_mig_compatible(int world_size) {
  if (world_size > 1)
    mig_error(
        strprintf("a MIG instance cannot be combined with multi-GPU data parallel (%d processes): MIG "
                  "instances have no NVLink or peer-to-peer access and each process sees one instance; "
                  "train with one process",
                  world_size));
}

void apply_mig_choice(const std::string& mig_uuid) {
  const char* previous = std::getenv("CUDA_VISIBLE_DEVICES");
  if (previous && *previous && mig_uuid != previous)
    log_warn(strprintf("--mig replaces CUDA_VISIBLE_DEVICES=%s with %s", previous, mig_uuid.c_str()));
  if (setenv("CUDA_VISIBLE_DEVICES", mig_uuid.c_str(), 1) != 0)
    throw std::runtime_error(std::string("setting CUDA_VISIBLE_DEVICES failed: ") + std::strerror(errno));
}

}  // namespace rn50::monitor
