// input/gpu_decode/nvjpeg_support.h: what the GPU decoder builds on: owners of nvJPEG handles, states, parsers, CUDA
// events and pinned memory; device and pinned allocation; the memory pool nvJPEG allocates from; handle creation.
// Included only by the nvJPEG build's decoder sources.
#pragma once

#include <ATen/ops/empty.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <nvjpeg.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <type_traits>

#include "cuda/cuda_check.h"
#include "input/gpu_decode/deferred_reuse_memory.h"
#include "input/gpu_decode/nvjpeg_check.h"

namespace rn50::input {

// Owners of nvJPEG and CUDA objects: every one is released by its unique_ptr's deleter.

template <class Handle, nvjpegStatus_t (*destroy)(Handle)>
struct NvjpegDeleter {
  void operator()(Handle h) const { destroy(h); }
};
using HandleOwner =
    std::unique_ptr<std::remove_pointer_t<nvjpegHandle_t>, NvjpegDeleter<nvjpegHandle_t, nvjpegDestroy>>;
using StateOwner =
    std::unique_ptr<std::remove_pointer_t<nvjpegJpegState_t>, NvjpegDeleter<nvjpegJpegState_t, nvjpegJpegStateDestroy>>;
using StreamOwner = std::unique_ptr<std::remove_pointer_t<nvjpegJpegStream_t>,
                                    NvjpegDeleter<nvjpegJpegStream_t, nvjpegJpegStreamDestroy>>;

struct CudaEventDeleter {
  void operator()(cudaEvent_t e) const { cudaEventDestroy(e); }
};
struct PinnedFree {
  void operator()(void* p) const { cudaFreeHost(p); }
};
using CudaEventOwner = std::unique_ptr<std::remove_pointer_t<cudaEvent_t>, CudaEventDeleter>;
using PinnedMemory = std::unique_ptr<void, PinnedFree>;

inline CudaEventOwner make_timing_event() {
  cudaEvent_t event = nullptr;
  RN50_CUDA_CHECK(cudaEventCreate(&event));
  return CudaEventOwner(event);
}

// Seconds between two completed events.
inline double seconds_between(const CudaEventOwner& from, const CudaEventOwner& to) {
  float ms = 0;
  RN50_CUDA_CHECK(cudaEventElapsedTime(&ms, from.get(), to.get()));
  return ms / 1e3;
}

// Device memory as byte tensors from LibTorch's caching allocator, allocated for use on `stream` (a pool stream,
// never destroyed, so the allocator's blocks never name a dead stream): growing a buffer on the hot path does not
// synchronise the device, as cudaFree would.
inline at::Tensor device_alloc(size_t bytes, int device, cudaStream_t stream) {
  c10::cuda::CUDAStreamGuard on_stream(c10::cuda::getStreamFromExternal(stream, static_cast<c10::DeviceIndex>(device)));
  return at::empty({static_cast<int64_t>(bytes)}, at::TensorOptions().dtype(at::kByte).device(at::kCUDA, device));
}

inline PinnedMemory pinned_alloc(size_t bytes) {
  void* p = nullptr;
  RN50_CUDA_CHECK(cudaHostAlloc(&p, bytes, cudaHostAllocDefault));
  return PinnedMemory(p);
}

// Device memory that grows to the largest request and is then reused. Callers grow it only when no queued work
// reads it any more.
class GrowingDeviceBuffer {
 public:
  uint8_t* reserve(size_t bytes, int device, cudaStream_t stream) {
    if (bytes > capacity_) {
      memory_ = at::Tensor();  // freed first: the old contents are not needed
      capacity_ = 0;
      const size_t grown = bytes + bytes / 4;  // headroom, so that slightly larger batches do not reallocate
      memory_ = device_alloc(grown, device, stream);
      capacity_ = grown;
    }
    return memory_.data_ptr<uint8_t>();
  }

 private:
  at::Tensor memory_;
  size_t capacity_ = 0;
};

// The device and pinned memory that nvJPEG's handles allocate from.
struct NvjpegMemory {
  DeferredReuseMemory device{[](size_t size) -> void* {
                               void* p = nullptr;
                               if (cudaMalloc(&p, size) == cudaSuccess) return p;
                               cudaGetLastError();  // nvJPEG reports it: NVJPEG_STATUS_ALLOCATOR_FAILURE
                               return nullptr;
                             },
                             [](void* p) { cudaFree(p); }};
  DeferredReuseMemory pinned{[](size_t size) -> void* {
                               void* p = nullptr;
                               if (cudaHostAlloc(&p, size, cudaHostAllocDefault) == cudaSuccess) return p;
                               cudaGetLastError();
                               return nullptr;
                             },
                             [](void* p) { cudaFreeHost(p); }};
  void set_batch(uint64_t batch) {
    device.set_batch(batch);
    pinned.set_batch(batch);
  }
  void completed(uint64_t batch) {
    device.completed(batch);
    pinned.completed(batch);
  }
  uint64_t raw_allocations() const { return device.raw_allocations() + pinned.raw_allocations(); }
};

#if defined(NVJPEG_VER_MAJOR) && NVJPEG_VER_MAJOR >= 12
constexpr bool kOwnAllocators = true;  // nvjpegCreateExV2: allocators with a context
inline int device_malloc(void* memory, void** ptr, size_t size, cudaStream_t) {
  return static_cast<NvjpegMemory*>(memory)->device.allocate(ptr, size);
}
inline int device_free(void* memory, void* ptr, size_t, cudaStream_t) {
  return static_cast<NvjpegMemory*>(memory)->device.release(ptr);
}
inline int pinned_malloc(void* memory, void** ptr, size_t size, cudaStream_t) {
  return static_cast<NvjpegMemory*>(memory)->pinned.allocate(ptr, size);
}
inline int pinned_free(void* memory, void* ptr, size_t, cudaStream_t) {
  return static_cast<NvjpegMemory*>(memory)->pinned.release(ptr);
}
inline nvjpegStatus_t create_with(nvjpegBackend_t backend, unsigned flags, NvjpegMemory& memory,
                                  nvjpegHandle_t* handle) {
  nvjpegDevAllocatorV2_t device{};
  device.dev_malloc = device_malloc;
  device.dev_free = device_free;
  device.dev_ctx = &memory;
  nvjpegPinnedAllocatorV2_t pinned{};
  pinned.pinned_malloc = pinned_malloc;
  pinned.pinned_free = pinned_free;
  pinned.pinned_ctx = &memory;
  return nvjpegCreateExV2(backend, &device, &pinned, flags, handle);
}
#else
constexpr bool kOwnAllocators = false;  // nvJPEG before 12 has no allocators with a context: its defaults
inline nvjpegStatus_t create_with(nvjpegBackend_t backend, unsigned flags, NvjpegMemory&, nvjpegHandle_t* handle) {
  return nvjpegCreateEx(backend, nullptr, nullptr, flags, handle);
}
#endif

// nvJPEG handles with chroma upsampling by interpolation where the library has it: libjpeg's "fancy"
// upsampling, which the CPU path uses, is an interpolation too. Returns the creation status.
inline nvjpegStatus_t create_handle(nvjpegBackend_t backend, unsigned flags, NvjpegMemory& memory, HandleOwner& out,
                                    bool& interpolated) {
  nvjpegHandle_t handle = nullptr;
  nvjpegStatus_t status = NVJPEG_STATUS_NOT_INITIALIZED;
  interpolated = false;
#ifdef NVJPEG_FLAGS_UPSAMPLING_WITH_INTERPOLATION
  status = create_with(backend, flags | NVJPEG_FLAGS_UPSAMPLING_WITH_INTERPOLATION, memory, &handle);
  interpolated = status == NVJPEG_STATUS_SUCCESS;
#endif
  if (status != NVJPEG_STATUS_SUCCESS) status = create_with(backend, flags, memory, &handle);
  if (status != NVJPEG_STATUS_SUCCESS) return status;
  out.reset(handle);
  // Headroom on every allocation, so that buffers are regrown rarely as image sizes vary from batch to batch
  // (16 MB device and 8 MB pinned, DALI's defaults).
  RN50_NVJPEG_CHECK(nvjpegSetDeviceMemoryPadding(size_t{16} << 20, handle));
  RN50_NVJPEG_CHECK(nvjpegSetPinnedMemoryPadding(size_t{8} << 20, handle));
  return status;
}

inline StateOwner make_state(nvjpegHandle_t handle) {
  nvjpegJpegState_t state = nullptr;
  RN50_NVJPEG_CHECK(nvjpegJpegStateCreate(handle, &state));
  return StateOwner(state);
}

// A header parser for `handle`.
inline StreamOwner make_parser(nvjpegHandle_t handle) {
  nvjpegJpegStream_t parse = nullptr;
  RN50_NVJPEG_CHECK(nvjpegJpegStreamCreate(handle, &parse));
  return StreamOwner(parse);
}

// Each image of a batch starts at a multiple of this in the decode buffer.
constexpr size_t kAlignment = 256;
inline size_t aligned(size_t bytes) { return (bytes + kAlignment - 1) / kAlignment * kAlignment; }

// Which decoder takes an image: the hardware engines (batched), nvJPEG's default backend, or libjpeg.
// kPredecoded: the loader's threads decoded it (decode_cpu_share); only uploaded.
// kSkipped: the loader could not read the sample and reported it (EncodedSample::skipped); nothing decodes it.
enum class Route { kHardware, kHybrid, kCpu, kPredecoded, kSkipped };

}  // namespace rn50::input
