// ops/current_stream.cpp: the current CUDA stream of a device, as LibTorch keeps it (CUDA builds only).
#include "ops/current_stream.h"

#include <c10/cuda/CUDAStream.h>

namespace rn50::ops::detail {

cudaStream_t current_stream(int device) {
  return c10::cuda::getCurrentCUDAStream(static_cast<c10::DeviceIndex>(device)).stream();
}

}  // namespace rn50::ops::detail
