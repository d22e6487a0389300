// monitor/links.h: how the visible GPUs are linked (NVLink or not, peer access), in one line for the logs.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "monitor/nvml.h"

namespace rn50::monitor {

// `cuda_uuids`: the visible GPUs' UUIDs in CUDA's order ("GPU-..."); `peer_access(a, b)`: CUDA's answer for
// two of them. NVML (which numbers GPUs its own way) is matched by UUID; with no NVML (nullptr) or a GPU it
// does not list, the link type is "link type unknown". Empty with fewer than two GPUs.
// Example: "GPU0-GPU1 NVLink (18 links), peer access".
std::string describe_gpu_links(NvmlApi* nvml, const std::vector<std::string>& cuda_uuids,
                               const std::function<bool(int, int)>& peer_access);

}  // namespace rn50::monitor
