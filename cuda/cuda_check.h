// cuda/cuda_check.h: one macro family that checks CUDA calls and throws with file, line and expression.
#pragma once

#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

namespace rn50::cuda {

[[noreturn]] inline void throw_cuda_error(cudaError_t status, const char* expr, const char* file, int line) {
  throw std::runtime_error(std::string(file) + ":" + std::to_string(line) + ": " + expr +
                           " failed: " + cudaGetErrorName(status) + " (" + cudaGetErrorString(status) + ")");
}

}  // namespace rn50::cuda

#define RN50_CUDA_CHECK(expr)                                                                                 \
  do {                                                                                                        \
    const cudaError_t rn50_status_ = (expr);                                                                  \
    if (rn50_status_ != cudaSuccess) ::rn50::cuda::throw_cuda_error(rn50_status_, #expr, __FILE__, __LINE__); \
  } while (0)
