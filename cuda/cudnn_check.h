// cuda/cudnn_check.h: RN50_CUDNN_CHECK, the cuDNN twin of RN50_CUDA_CHECK: throws with file, line, expression and
// cudnnGetErrorString. Only targets that found cudnn.h include it (ops/ in CUDA builds).
#pragma once

#include <cudnn.h>

#include <stdexcept>
#include <string>

namespace rn50::cuda {

[[noreturn]] inline void throw_cudnn_error(cudnnStatus_t status, const char* expr, const char* file, int line) {
  throw std::runtime_error(std::string(file) + ":" + std::to_string(line) + ": " + expr +
                           " failed: " + cudnnGetErrorString(status));
}

}  // namespace rn50::cuda

#define RN50_CUDNN_CHECK(expr)                                                        \
  do {                                                                                \
    const cudnnStatus_t rn50_cudnn_status_ = (expr);                                  \
    if (rn50_cudnn_status_ != CUDNN_STATUS_SUCCESS)                                   \
      ::rn50::cuda::throw_cudnn_error(rn50_cudnn_status_, #expr, __FILE__, __LINE__); \
  } while (0)
