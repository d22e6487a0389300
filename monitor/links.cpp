// monitor/links.cpp: the visible GPUs' links, NVML matched to CUDA by UUID.
#include "monitor/links.h"

#include <optional>

namespace rn50::monitor {

std::string describe_gpu_links(NvmlApi* nvml, const std::vector<std::string>& cuda_uuids,
                               const std::function<bool(int, int)>& peer_access) {
  // CUDA index -> NVML index.
  std::vector<std::optional<unsigned>> nvml_index(cuda_uuids.size());
  if (nvml) {
    try {
      const unsigned count = nvml->device_count();
      for (unsigned i = 0; i < count; ++i) {
        const std::string uuid = nvml->uuid(NvmlDevice{i, std::nullopt});
        for (size_t c = 0; c < cuda_uuids.size(); ++c) {
          if (cuda_uuids[c] == uuid) nvml_index[c] = i;
        }
      }
    } catch (const std::exception&) {
      nvml_index.assign(cuda_uuids.size(), std::nullopt);  // unmatched: "link type unknown"
    }
  }
  std::string out;
  const int n = static_cast<int>(cuda_uuids.size());
  for (int a = 0; a < n; ++a) {
    for (int b = a + 1; b < n; ++b) {
      std::string kind = "link type unknown";
      const auto ia = nvml_index[static_cast<size_t>(a)], ib = nvml_index[static_cast<size_t>(b)];
      if (ia && ib) {
        try {
          const std::optional<bool> nvlink = nvml->nvlink_between(*ia, *ib);
          if (nvlink && *nvlink) {
            const std::optional<unsigned> links = nvml->active_nvlinks(*ia);
            kind = links ? "NVLink (" + std::to_string(*links) + " links)" : "NVLink";
          } else if (nvlink) {
            kind = "no NVLink (PCIe or the host)";
          }
        } catch (const std::exception& e) {  // a description for the log: never a reason to stop a run
          kind = std::string("link type unknown (NVML: ") + e.what() + ")";
        }
      }
      out += (out.empty() ? "" : "; ") + ("GPU" + std::to_string(a) + "-GPU" + std::to_string(b) + " " + kind + ", " +
                                          (peer_access(a, b) ? "peer access" : "no peer access"));
    }
  }
  return out;
}

}  // namespace rn50::monitor
