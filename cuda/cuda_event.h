// cuda/cuda_event.h: an owned CUDA event with timing, and the seconds between two (CUDA builds only).
#pragma once

#include <cuda_runtime.h>

#include "cuda/cuda_check.h"

namespace rn50::cuda {

// An owned CUDA event (timing enabled).
struct Event {
  Event() { RN50_CUDA_CHECK(cudaEventCreate(&event)); }
  ~Event() { cudaEventDestroy(event); }
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  cudaEvent_t event = nullptr;
};

inline double elapsed_seconds(cudaEvent_t start, cudaEvent_t end) {
  float ms = 0;
  RN50_CUDA_CHECK(cudaEventElapsedTime(&ms, start, end));
  return ms / 1000.0;
}

}  // namespace rn50::cuda
