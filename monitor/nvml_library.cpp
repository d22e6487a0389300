// monitor/nvml_library.cpp: NVML's library chosen and opened at run time, its functions found, failures in one line.
#include "monitor/nvml_library.h"

#include <cstdlib>

namespace rn50::monitor {

std::string nvml_library_name() {
  const char* chosen = std::getenv(kNvmlLibraryVariable);
  return chosen && *chosen ? chosen : kNvmlLibraryDefault;
}

std::optional<NvmlLibrary> load_nvml_library(const std::vector<NvmlSymbol>& symbols, std::string* why_not) {
  const std::string name = nvml_library_name();
  const bool chosen = name != kNvmlLibraryDefault;
  std::string reason;
  NvmlLibrary loaded{SharedLibrary::open(name, &reason), {}};
  if (!loaded.library) {
    if (why_not) {
      *why_not = reason + (chosen ? std::string(" (") + kNvmlLibraryVariable + "=" + name + ")"
                                  : std::string(" (NVML comes with the NVIDIA driver; a container needs --gpus)"));
    }
    return std::nullopt;
  }
  for (const NvmlSymbol& symbol : symbols) {
    void* address = loaded.library->find(symbol.name);
    if (!address && symbol.required) {
      if (why_not) {
        *why_not = loaded.library->path() + " has no " + symbol.name +
                   ": the NVIDIA driver is older than this rn50's NVML calls need";
      }
      return std::nullopt;
    }
    loaded.addresses.push_back(address);
  }
  return loaded;
}

}  // namespace rn50::monitor
