// cuda/cuda_support.h: what the trainer needs from CUDA, behind plain types; the CPU-only build stubs it.
#pragma once

#include <array>
#include <memory>
#include <optional>
#include <string>

#include "core/host_memory.h"

namespace rn50::cuda {

// True when this binary was built against a CUDA LibTorch.
bool built_with_cuda();

// Page-locked host memory (cudaHostAlloc), for asynchronous host-to-device copies.
std::shared_ptr<HostAllocator> make_pinned_allocator();
// Page-locks memory the caller mapped (cudaHostRegister; a shared-memory segment) until the returned handle goes; null
// in a CPU-only build or where CUDA refuses (`why_not` says why; copies from it are then pageable, slower).
std::shared_ptr<void> register_host_memory(void* ptr, size_t bytes, std::string* why_not);

// Peak memory since the last reset, in GiB: allocated by tensors (torch.cuda.max_memory_allocated) and
// reserved by the caching allocator (what nvidia-smi sees, less the CUDA context).
std::optional<double> peak_memory_gib(int device);
std::optional<double> peak_reserved_gib(int device);
void reset_peak_memory(int device);

// Driver and runtime CUDA versions (e.g. 13000), to check that they fit together.
struct CudaVersions {
  int driver = 0;
  int runtime = 0;
};
std::optional<CudaVersions> cuda_versions();

// What CUDA and LibTorch report of one device: the facts monitor/devices.h describes.
struct DeviceFacts {
  std::string name;
  int major = 0, minor = 0;  // compute capability
  int sms = 0;
  double memory_gib = 0;
  std::array<unsigned char, 16> uuid{};  // cudaDeviceProp::uuid, formatted by monitor::format_cuda_uuid
  int driver = 0, runtime = 0;           // CUDA versions, e.g. 13000
  long cudnn = 0;                        // LibTorch's cuDNN, e.g. 91900
};
// Nullopt in a CPU-only build.
std::optional<DeviceFacts> device_facts(int device);

// Visible CUDA devices (0 in a CPU-only build), and whether device a can reach device b's memory directly.
int device_count();
bool can_access_peer(int a, int b);

}  // namespace rn50::cuda
