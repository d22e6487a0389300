// monitor/devices.h: the GPU and the links between the visible GPUs, described in one line each for the start-up
// table and the doctor, from CUDA's facts (cuda/cuda_support.h) and NVML's link types.
#pragma once

#include <string>

namespace rn50::monitor {

// The device's UUID in NVML's form ("GPU-..."), to find it in NVML, which ignores CUDA_VISIBLE_DEVICES; empty in a
// CPU-only build.
std::string device_uuid(int cuda_device);

// Name, compute capability, SMs, memory, and the driver's, runtime's and LibTorch's cuDNN versions.
std::string describe_device(int cuda_device);

// How the visible GPUs reach each other (monitor/links.h); empty with fewer than two.
std::string describe_links();

}  // namespace rn50::monitor
