// ops/current_stream.cpp: the current CUDA stream of a device as LibTorch keeps it, and SideStream's fork and join
// (CUDA builds only: the one file of ops/ that includes c10/cuda).
#include "ops/current_stream.h"

#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <map>

#include "cuda/cuda_check.h"
#include "ops/side_stream.h"

namespace rn50::ops {
namespace detail {

cudaStream_t current_stream(int device) {
  return c10::cuda::getCurrentCUDAStream(static_cast<c10::DeviceIndex>(device)).stream();
}

}  // namespace detail

namespace {

// A device's side stream and the events of its forks and joins, made once per thread and kept until the thread ends
// (each fork or join records an event and has the other stream wait on it at once, so one event of each kind is
// enough, in eager runs and in graph capture alike).
struct SideResources {
  cudaStream_t stream = nullptr;
  cudaEvent_t fork = nullptr, join = nullptr;
  SideResources() = default;
  SideResources(const SideResources&) = delete;
  SideResources& operator=(const SideResources&) = delete;
  ~SideResources() {
    // At thread exit the CUDA runtime may already be unloading: errors are of no use then.
    if (join) cudaEventDestroy(join);
    if (fork) cudaEventDestroy(fork);
    if (stream) cudaStreamDestroy(stream);
  }
};

SideResources& side_resources(int device) {
  thread_local std::map<int, SideResources> by_device;
  SideResources& r = by_device[device];
  if (!r.stream) {
    const c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(device));
    RN50_CUDA_CHECK(cudaEventCreateWithFlags(&r.fork, cudaEventDisableTiming));
    RN50_CUDA_CHECK(cudaEventCreateWithFlags(&r.join, cudaEventDisableTiming));
    RN50_CUDA_CHECK(cudaStreamCreateWithFlags(&r.stream, cudaStreamNonBlocking));
  }
  return r;
}

}  // namespace

struct SideStream::State {
  SideResources* resources;
  c10::cuda::CUDAStream main, side;
  bool forked = false;  // work queued on the side stream since the last join
};

SideStream::SideStream(int device, bool enabled) {
  if (!enabled) return;
  const auto index = static_cast<c10::DeviceIndex>(device);
  SideResources& r = side_resources(device);
  state_.reset(
      new State{&r, c10::cuda::getCurrentCUDAStream(index), c10::cuda::getStreamFromExternal(r.stream, index)});
}

SideStream::~SideStream() {
  try {
    join();
  } catch (...) {
    // A failed join leaves the device in error; the exception that is unwinding (or the next call) reports it.
  }
}

void SideStream::enter() {
  State& s = *state_;
  RN50_CUDA_CHECK(cudaEventRecord(s.resources->fork, s.main.stream()));
  RN50_CUDA_CHECK(cudaStreamWaitEvent(s.side.stream(), s.resources->fork, 0));
  s.forked = true;
  c10::cuda::setCurrentCUDAStream(s.side);
}

void SideStream::leave() { c10::cuda::setCurrentCUDAStream(state_->main); }

void SideStream::join() {
  if (!state_ || !state_->forked) return;
  State& s = *state_;
  s.forked = false;
  RN50_CUDA_CHECK(cudaEventRecord(s.resources->join, s.side.stream()));
  RN50_CUDA_CHECK(cudaStreamWaitEvent(s.main.stream(), s.resources->join, 0));
}

}  // namespace rn50::ops
