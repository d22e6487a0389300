// monitor/devices.cpp: the device and link descriptions, composed from CUDA's facts and NVML.
#include "monitor/devices.h"

#include <memory>
#include <optional>
#include <vector>

#include "core/log.h"
#include "cuda/cuda_support.h"
#include "monitor/links.h"
#include "monitor/nvml.h"
#include "monitor/utilisation.h"

namespace rn50::monitor {

std::string device_uuid(int cuda_device) {
  const std::optional<cuda::DeviceFacts> f = cuda::device_facts(cuda_device);
  return f ? format_cuda_uuid(f->uuid.data()) : "";
}

std::string describe_device(int cuda_device) {
  const std::optional<cuda::DeviceFacts> f = cuda::device_facts(cuda_device);
  if (!f) return "no CUDA in this build";
  return strprintf("%s (sm_%d%d, %d SMs, %.0f GiB), driver CUDA %d.%d, runtime %d.%d, cuDNN %ld", f->name.c_str(),
                   f->major, f->minor, f->sms, f->memory_gib, f->driver / 1000, (f->driver % 1000) / 10,
                   f->runtime / 1000, (f->runtime % 1000) / 10, f->cudnn);
}

std::string describe_links() {
  const int count = cuda::device_count();
  std::vector<std::string> uuids;
  for (int i = 0; i < count; ++i) uuids.push_back(device_uuid(i));
  const std::unique_ptr<NvmlApi> nvml = count > 1 ? open_nvml(nullptr) : nullptr;
  return describe_gpu_links(nvml.get(), uuids, cuda::can_access_peer);
}

}  // namespace rn50::monitor
