// cuda/kernels.h: rn50's own CUDA kernels (input normalisation, the fused SGD and AdamW updates) and what the build
// put in them.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <string>

namespace rn50::cuda::kernels {

enum class OutType { F32, F16, BF16 };

// uint8 NHWC images -> (x / 255 - mean) / std, written as NCHW (channels_last false) or NHWC memory of
// `out_channels` (3 to 8) channels, those past the image's 3 zeros (a ResNet stem's padded input, models/stem.h).
void normalize_images(const uint8_t* in, void* out, OutType type, int64_t images, int64_t height, int64_t width,
                      int out_channels, bool channels_last, const float scale[3], const float shift[3],
                      cudaStream_t stream);

// One parameter tensor of a fused update: its value, gradient and up to two state buffers (SGD: momentum; AdamW:
// the first and second moments).
struct UpdateSlice {
  float* param;
  const float* grad;
  float* state0;
  float* state1;
  int64_t size;
  float weight_decay;
};

// Where each block of a fused update works: `chunk_tensor` and `chunk_begin` list (tensor index, first element)
// pairs of `chunk_size` elements. All arrays live on the device. Every update does nothing when *found_inf != 0 (fp16
// loss scaling found an overflow) and multiplies each gradient by *grad_scale (clipping); both pointers may be null.
struct UpdateChunks {
  const UpdateSlice* slices;
  const int32_t* chunk_tensor;
  const int64_t* chunk_begin;
  int64_t num_chunks;
  int64_t chunk_size;
  const float* found_inf;
  const float* grad_scale;
};

// buf = momentum * buf + g + wd * p;  p += neg_lr * buf, over every tensor in one launch.
void fused_sgd(const UpdateChunks& chunks, float momentum, const float* neg_lr, cudaStream_t stream);

// AdamW with the step count t (already counting this update) and the rate on the device:
// p *= 1 - lr * wd; m = b1 m + (1 - b1) g; v = b2 v + (1 - b2) g^2; p -= lr / (1 - b1^t) * m / (sqrt(v / (1 - b2^t)) +
// eps), over every tensor in one launch.
// The betas come as given (float) and their complements computed in double first (1 - 0.999f is not 0.001f).
void fused_adamw(const UpdateChunks& chunks, double beta1, double beta2, float eps, const float* lr, const float* steps,
                 cudaStream_t stream);

// How the kernels were built and what the device runs: e.g. "sm_90 native code (built: sm_90), PTX 9.0".
std::string describe_build(int device);

}  // namespace rn50::cuda::kernels
