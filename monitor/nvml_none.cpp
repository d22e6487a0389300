// monitor/nvml_none.cpp: the CPU-only build's open_nvml, which always reports NVML as unavailable.
#include "monitor/nvml.h"

namespace rn50::monitor {

std::unique_ptr<NvmlApi> open_nvml(std::string* why_not) {
  if (why_not) *why_not = "this rn50 was built without CUDA (no NVML)";
  return nullptr;
}

}  // namespace rn50::monitor
