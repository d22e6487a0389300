// cuda/cuda_support.cpp: pinned host memory, allocator statistics and device description (CUDA build only).
#include "cuda/cuda_support.h"

#include <ATen/cuda/CUDAContext.h>
#include <ATen/detail/CUDAHooksInterface.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <cuda_runtime.h>

#include <memory>
#include <vector>

#include "core/log.h"
#include "cuda/cuda_check.h"
#include "monitor/links.h"
#include "monitor/nvml.h"
#include "monitor/utilisation.h"

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

std::string describe_links() {
  int count = 0;
  RN50_CUDA_CHECK(cudaGetDeviceCount(&count));
  std::vector<std::string> uuids;
  for (int i = 0; i < count; ++i) uuids.push_back(device_uuid(i));
  const std::unique_ptr<monitor::NvmlApi> nvml = count > 1 ? monitor::open_nvml(nullptr) : nullptr;
  return monitor::describe_gpu_links(nvml.get(), uuids, [](int a, int b) {
    int peer = 0;
    RN50_CUDA_CHECK(cudaDeviceCanAccessPeer(&peer, a, b));
    return peer != 0;
  });
}

std::string device_uuid(int device) {
  cudaDeviceProp prop{};
  RN50_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  return monitor::format_cuda_uuid(prop.uuid.bytes);
}

std::string describe_device(int device) {
  cudaDeviceProp prop{};
  RN50_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  int driver = 0, runtime = 0;
  RN50_CUDA_CHECK(cudaDriverGetVersion(&driver));
  RN50_CUDA_CHECK(cudaRuntimeGetVersion(&runtime));
  return strprintf("%s (sm_%d%d, %d SMs, %.0f GiB), driver CUDA %d.%d, runtime %d.%d, cuDNN %ld", prop.name, prop.major,
                   prop.minor, prop.multiProcessorCount,
                   static_cast<double>(prop.totalGlobalMem) / (1024.0 * 1024.0 * 1024.0), driver / 1000,
                   (driver % 1000) / 10, runtime / 1000, (runtime % 1000) / 10,
                   static_cast<long>(at::detail::getCUDAHooks().versionCuDNN()));
}

}  // namespace rn50::cuda
