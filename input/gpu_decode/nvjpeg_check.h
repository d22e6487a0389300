// input/gpu_decode/nvjpeg_check.h: RN50_NVJPEG_CHECK, nvJPEG's member of the check family in core/check.h (reason:
// the status's name). Only the nvJPEG build includes it (nvjpeg.h is not in every CUDA toolkit install).
#pragma once

#include <nvjpeg.h>

#include <string>

#include "core/check.h"

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

}  // namespace rn50::input

#define RN50_NVJPEG_CHECK(expr) \
  RN50_CHECK_STATUS(nvjpegStatus_t, NVJPEG_STATUS_SUCCESS, ::rn50::input::nvjpeg_status_name, expr, #expr)
