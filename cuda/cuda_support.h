// cuda/cuda_support.h: what the trainer needs from CUDA, behind plain types; the CPU-only build stubs it.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "core/host_memory.h"

namespace rn50::cuda {

// True when this binary was built against a CUDA LibTorch.
bool built_with_cuda();

// Page-locked host memory (cudaHostAlloc), for asynchronous host-to-device copies.
std::shared_ptr<HostAllocator> make_pinned_allocator();

// Peak memory since the last reset, in GiB: allocated by tensors (torch.cuda.max_memory_allocated) and
// reserved by the caching allocator (what nvidia-smi sees, less the CUDA context).
std::optional<double> peak_memory_gib(int device);
std::optional<double> peak_reserved_gib(int device);
void reset_peak_memory(int device);

// The device's UUID in NVML's form ("GPU-..."), to find it in NVML, which ignores CUDA_VISIBLE_DEVICES.
std::string device_uuid(int device);

// Driver and runtime CUDA versions (e.g. 13000), to check that they fit together.
struct CudaVersions {
  int driver = 0;
  int runtime = 0;
};
std::optional<CudaVersions> cuda_versions();

// How the visible GPUs reach each other: "GPU0-GPU1 peer access" lines; empty with one GPU.
std::string describe_links();

// One line describing the GPU: name, compute capability, memory, and LibTorch's CUDA/cuDNN versions.
std::string describe_device(int device);

}  // namespace rn50::cuda
