// input/gpu_decode/nvjpeg_check.h: RN50_NVJPEG_CHECK, the nvJPEG twin of RN50_CUDA_CHECK: throws with file, line,
// expression and the status's name. Only the nvJPEG build includes it (nvjpeg.h is not in every CUDA toolkit install).
#pragma once

#include <nvjpeg.h>

#include <stdexcept>
#include <string>

namespace rn50::input {

inline std::string nvjpeg_status_name(nvjpegStatus_t status) {
  switch (status) {
    case NVJPEG_STATUS_SUCCESS:
      return "NVJPEG_STATUS_SUCCESS";
    case NVJPEG_STATUS_NOT_INITIALIZED:
      return "NVJPEG_STATUS_NOT_INITIALIZED";
    case NVJPEG_STATUS_INVALID_PARAMETER:
      return "NVJPEG_STATUS_INVALID_PARAMETER";
    case NVJPEG_STATUS_BAD_JPEG:
      return "NVJPEG_STATUS_BAD_JPEG";
    case NVJPEG_STATUS_JPEG_NOT_SUPPORTED:
      return "NVJPEG_STATUS_JPEG_NOT_SUPPORTED";
    case NVJPEG_STATUS_ALLOCATOR_FAILURE:
      return "NVJPEG_STATUS_ALLOCATOR_FAILURE";
    case NVJPEG_STATUS_EXECUTION_FAILED:
      return "NVJPEG_STATUS_EXECUTION_FAILED";
    case NVJPEG_STATUS_ARCH_MISMATCH:
      return "NVJPEG_STATUS_ARCH_MISMATCH";
    case NVJPEG_STATUS_INTERNAL_ERROR:
      return "NVJPEG_STATUS_INTERNAL_ERROR";
    case NVJPEG_STATUS_IMPLEMENTATION_NOT_SUPPORTED:
      return "NVJPEG_STATUS_IMPLEMENTATION_NOT_SUPPORTED";
    default:
      return "nvJPEG status " + std::to_string(static_cast<int>(status));  // newer than this list
  }
}

[[noreturn]] inline void throw_nvjpeg_error(nvjpegStatus_t status, const char* expr, const char* file, int line) {
  throw std::runtime_error(std::string(file) + ":" + std::to_string(line) + ": " + expr +
                           " failed: " + nvjpeg_status_name(status));
}

}  // namespace rn50::input

#define RN50_NVJPEG_CHECK(expr)                                                          \
  do {                                                                                   \
    const nvjpegStatus_t rn50_nvjpeg_status_ = (expr);                                   \
    if (rn50_nvjpeg_status_ != NVJPEG_STATUS_SUCCESS)                                    \
      ::rn50::input::throw_nvjpeg_error(rn50_nvjpeg_status_, #expr, __FILE__, __LINE__); \
  } while (0)
