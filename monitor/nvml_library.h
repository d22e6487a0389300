// monitor/nvml_library.h: which file NVML is opened from at run time, and the lookup of its functions (no nvml.h).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/shared_library.h"

namespace rn50::monitor {

// The environment variable that names the NVML library to open instead of the driver's. A name that does not exist
// hides NVML as a host without the NVIDIA driver would (how scripts/runtime-libs.sh checks `rn50 --help` and the
// doctor without it).
inline constexpr const char* kNvmlLibraryVariable = "RN50_NVML_LIBRARY";
// The driver's NVML: the versioned name, which the driver installs and the NVIDIA container toolkit mounts (the
// unversioned libnvidia-ml.so comes with development packages only).
inline constexpr const char* kNvmlLibraryDefault = "libnvidia-ml.so.1";

// $RN50_NVML_LIBRARY where it is set and not empty, else libnvidia-ml.so.1.
std::string nvml_library_name();

// A function to find; an optional one may be missing (newer than the driver) and is then nullptr.
struct NvmlSymbol {
  const char* name;
  bool required = true;
};

// The open library and the address of each symbol, in the order they were asked for.
struct NvmlLibrary {
  std::unique_ptr<SharedLibrary> library;
  std::vector<void*> addresses;
};

// Opens nvml_library_name() and finds every symbol; nullopt where the library cannot be opened or lacks a required
// symbol, with a one-line reason naming the file and what to do in *why_not (when not null).
std::optional<NvmlLibrary> load_nvml_library(const std::vector<NvmlSymbol>& symbols, std::string* why_not);

}  // namespace rn50::monitor
