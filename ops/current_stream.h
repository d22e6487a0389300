// ops/current_stream.h: the current CUDA stream of a device, from the one file of ops/ that includes c10/cuda (CUDA
// builds only; Debian's LibTorch 1.13 cannot compile c10/cuda, so the rest of the CUDA glue stays checkable there).
#pragma once

#include <cuda_runtime.h>

namespace rn50::ops::detail {

cudaStream_t current_stream(int device);

}  // namespace rn50::ops::detail
