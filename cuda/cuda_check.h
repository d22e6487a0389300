// cuda/cuda_check.h: RN50_CUDA_CHECK, the CUDA runtime's member of the check family in core/check.h.
#pragma once

#include <cuda_runtime.h>

#include <string>

#include "core/check.h"

namespace rn50::cuda {

inline std::string cuda_error_text(cudaError_t status) {
  return std::string(cudaGetErrorName(status)) + " (" + cudaGetErrorString(status) + ")";
}

}  // namespace rn50::cuda

#define RN50_CUDA_CHECK(expr) RN50_CHECK_STATUS(cudaError_t, cudaSuccess, ::rn50::cuda::cuda_error_text, expr, #expr)
