// cuda/cuda_support.cpp: pinned host memory, allocator statistics and the device's facts (CUDA build only).
#include "cuda/cuda_support.h"

#include <ATen/cuda/CUDAContext.h>
#include <ATen/detail/CUDAHooksInterface.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <cuda_runtime.h>

#include <cstring>
#include <memory>

#include "cuda/cuda_check.h"
#include "cuda/nvtx.h"

// NVTX 3 is header-only (it finds a profiler's library at the first call); a toolkit without it gets no ranges.
#if __has_include(<nvtx3/nvToolsExt.h>)
#include <nvtx3/nvToolsExt.h>
#define RN50_NVTX 1
#else
#define RN50_NVTX 0
#endif

namespace rn50::cuda {
namespace {

class PinnedAllocator final : public HostAllocator {
 public:
  void* allocate(size_t bytes) override {
    void* ptr = nullptr;
    RN50_CUDA_CHECK(cudaHostAlloc(&ptr, bytes, cudaHostAllocDefault));
    return ptr;
  }
  void deallocate(void* ptr) noexcept override { cudaFreeHost(ptr); }
  bool pinned() const override { return true; }
};

}  // namespace

bool built_with_cuda() { return true; }

std::shared_ptr<HostAllocator> make_pinned_allocator() { return std::make_shared<PinnedAllocator>(); }

std::shared_ptr<void> register_host_memory(void* ptr, size_t bytes, std::string* why_not) {
  const cudaError_t e = cudaHostRegister(ptr, bytes, cudaHostRegisterDefault);
  if (e != cudaSuccess) {
    cudaGetLastError();  // not sticky: clear it
    if (why_not) *why_not = cudaGetErrorString(e);
    return nullptr;
  }
  return std::shared_ptr<void>(ptr, [](void* p) { cudaHostUnregister(p); });
}

std::optional<double> peak_memory_gib(int device) {
  const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(device);
  const auto& peak = stats.allocated_bytes[static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE)].peak;
  return static_cast<double>(peak) / (1024.0 * 1024.0 * 1024.0);
}

std::optional<double> peak_reserved_gib(int device) {
  const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(device);
  const auto& peak = stats.reserved_bytes[static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE)].peak;
  return static_cast<double>(peak) / (1024.0 * 1024.0 * 1024.0);
}

void reset_peak_memory(int device) { c10::cuda::CUDACachingAllocator::resetPeakStats(device); }

std::optional<CudaVersions> cuda_versions() {
  CudaVersions v;
  RN50_CUDA_CHECK(cudaDriverGetVersion(&v.driver));
  RN50_CUDA_CHECK(cudaRuntimeGetVersion(&v.runtime));
  return v;
}

std::optional<DeviceFacts> device_facts(int device) {
  cudaDeviceProp prop{};
  RN50_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  DeviceFacts f;
  f.name = prop.name;
  f.major = prop.major;
  f.minor = prop.minor;
  f.sms = prop.multiProcessorCount;
  f.memory_gib = static_cast<double>(prop.totalGlobalMem) / (1024.0 * 1024.0 * 1024.0);
  std::memcpy(f.uuid.data(), prop.uuid.bytes, f.uuid.size());
  RN50_CUDA_CHECK(cudaDriverGetVersion(&f.driver));
  RN50_CUDA_CHECK(cudaRuntimeGetVersion(&f.runtime));
  f.cudnn = static_cast<long>(at::detail::getCUDAHooks().versionCuDNN());
  return f;
}

int device_count() {
  int count = 0;
  RN50_CUDA_CHECK(cudaGetDeviceCount(&count));
  return count;
}

bool can_access_peer(int a, int b) {
  int peer = 0;
  RN50_CUDA_CHECK(cudaDeviceCanAccessPeer(&peer, a, b));
  return peer != 0;
}

#if RN50_NVTX
NvtxRange::NvtxRange(const char* name) { nvtxRangePushA(name); }
NvtxRange::~NvtxRange() { nvtxRangePop(); }
#else
NvtxRange::NvtxRange(const char*) {}
NvtxRange::~NvtxRange() = default;
#endif

}  // namespace rn50::cuda
