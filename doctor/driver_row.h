// doctor/driver_row.h: the doctor's driver row: the NVIDIA driver this build's CUDA runtime needs, the host's driver,
// CUDA's forward-compatibility libraries (there, in use) and what to do, as a pure function of what was read.
#pragma once

#include <optional>
#include <string>

#include "doctor/host_view.h"
#include "doctor/rows.h"
#include "monitor/nvml.h"

namespace rn50::doctor {

// The oldest driver branch under which rn50 counts on CUDA's forward-compatibility libraries: R535, the oldest
// long-term support branch NVIDIA still maintains and the one many cloud images ship (issue 37).
inline constexpr int kOldestForwardCompatibleDriver = 535;

// A driver version as NVML and /proc/driver/nvidia/version write it.
struct DriverVersion {
  int branch = 0;    // 535
  std::string text;  // "535.104.05"
};

// "535.104.05" or "570.26": digits, a dot and more digits and dots; nullopt for anything else.
std::optional<DriverVersion> parse_driver_version(const std::string& text);

// The version in /proc/driver/nvidia/version's first line, for the proprietary ("NVIDIA UNIX x86_64 Kernel Module
// 535.104.05 ...") and the open kernel modules ("NVIDIA UNIX Open Kernel Module for x86_64  570.124.06 ..."); "" for
// text without one.
std::string driver_version_in_proc(const std::string& text);

// From the CUDA toolkit's release notes (Linux): the oldest driver branch with full support for the CUDA runtime
// `cuda` (12080 for 12.8: 570); nullopt for a runtime newer than rn50's table.
std::optional<int> driver_for_cuda(int cuda);
// The newest CUDA a driver branch fully supports (535: 12020); nullopt for a branch older or newer than the table.
std::optional<int> cuda_of_driver(int branch);
// The oldest driver of a CUDA major version's minor-version compatibility (11: 450, 12: 525, 13: 580): a runtime of
// that major version starts on it, but kernels compiled from PTX at run time do not load.
std::optional<int> minor_compatible_driver(int cuda_major);
// "12.8" for 12080.
std::string cuda_text(int cuda);

// What the GPU is, as far as forward compatibility goes: NVIDIA supports it on data-center GPUs and select RTX
// server SKUs, never on GeForce.
enum class GpuKind { kDataCenter, kWorkstation, kGeForce, kUnknown };
// NVML's brand where it says, else the product name ("NVIDIA GeForce RTX 4090", "NVIDIA H100 80GB HBM3").
GpuKind gpu_kind(const std::string& name, std::optional<monitor::GpuBrand> brand);

// CUDA's forward-compatibility libraries as the doctor finds them: a folder of them (the image's /opt/rn50/compat,
// beside rn50's bin/; NVIDIA's /usr/local/cuda/compat; a folder named compat that the loaded libcuda came from) and
// the libcuda this process has loaded.
struct CompatLibraries {
  std::string folder;                   // where a libcuda.so.* of them lies; "" where none was found
  std::optional<DriverVersion> driver;  // the driver they come from (libcuda.so.570.124.06)
  std::string loaded;                   // the libcuda this process has mapped (/proc/self/maps); "" before CUDA
  bool on_library_path = false;         // `folder` is on LD_LIBRARY_PATH, as rn50-entry puts it
};
CompatLibraries read_compat_libraries(const HostView& host);
// The host's driver from /proc/driver/nvidia/version, where NVML cannot say (no NVML, or one that failed).
std::optional<DriverVersion> read_proc_driver_version(const HostView& host);

enum class CompatState { kAbsent, kUnused, kInUse };
// In use: the loaded libcuda is the compat folder's or, before CUDA has loaded one, the folder is on LD_LIBRARY_PATH.
// Unused: the folder is there but the driver's own libcuda serves.
CompatState compat_state(const CompatLibraries& compat);

struct DriverFacts {
  std::optional<int> runtime_cuda;      // the CUDA runtime LibTorch was built with (12080); nullopt: CPU-only build
  std::optional<DriverVersion> driver;  // the host's (NVML's, else /proc's); nullopt: no driver found
  std::optional<int> nvml_cuda;         // NVML's CUDA version of the driver, for a branch newer than rn50's table
  std::string no_driver_reason;         // why no driver was found (NVML's reason), for the row's one line
  CompatLibraries compat;
  GpuKind gpu = GpuKind::kUnknown;
  std::string gpu_name;     // NVML's name of the GPU, "" where unknown
  bool cuda_works = false;  // CUDA found a device (through the compat libraries where they are in use)
};

// What NVML says of the host's driver (its version, else a one-line reason in facts.no_driver_reason; its CUDA
// version) and of GPU `gpu` (NVML's index: the CUDA device's where it was found; its name and kind). Throws what
// NvmlApi throws.
void read_nvml_driver_facts(monitor::NvmlApi& nvml, unsigned gpu, DriverFacts& facts);

// Section "gpu", check "NVIDIA driver": ok where the driver is new enough or the compat libraries make it work; warn
// where the runtime starts by minor-version compatibility alone; bad where CUDA cannot start here, with what to do;
// info without a CUDA runtime (CPU-only build) or without a driver.
ReportRow driver_row(const DriverFacts& facts);

}  // namespace rn50::doctor
