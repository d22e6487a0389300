// cuda/kernels.h: rn50's own CUDA kernels (input normalisation, fused SGD) and what the build put in them.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <string>

namespace rn50::cuda::kernels {

enum class OutType { F32, F16, BF16 };

// uint8 NHWC images -> (x / 255 - mean) / std, written as NCHW (channels_last false) or NHWC memory.
void normalize_images(const uint8_t* in, void* out, OutType type, int64_t images, int64_t height, int64_t width,
                      bool channels_last, const float scale[3], const float shift[3], cudaStream_t stream);

// One parameter tensor of the fused update.
struct SgdSlice {
  float* param;
  const float* grad;
  float* momentum;
  int64_t size;
  float weight_decay;
};

// buf = momentum * buf + grad + wd * p;  p += neg_lr * buf, over every tensor in one launch. `chunks`
// lists (tensor index, first element) pairs of `chunk_size` elements; all arrays live on the device.
// Does nothing when *found_inf != 0 (fp16 loss scaling found an overflow); found_inf may be null.
void fused_sgd(const SgdSlice* slices, const int32_t* chunk_tensor, const int64_t* chunk_begin, int64_t num_chunks,
               int64_t chunk_size, float momentum, const float* neg_lr, const float* found_inf, cudaStream_t stream);

// How the kernels were built and what the device runs: e.g. "sm_90 native code (built: sm_90), PTX 9.0".
std::string describe_build(int device);

}  // namespace rn50::cuda::kernels
