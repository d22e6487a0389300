// input/gpu_decode/crop_resize_kernel.h: decode: gpu's one kernel per batch: crop + resize + flip
// (input/gpu_decode/resample_math.h) + ImageNet normalisation + conversion to the training dtype, in NCHW or
// channels-last memory. No LibTorch.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/kernels.h"
#include "input/gpu_decode/resample_math.h"

namespace rn50::input::kernels {

// One output image: the decoded RGB image it is made from (device memory) and how.
struct ResampleJob {
  const uint8_t* image;
  input::ResamplePlan plan;
};

// For each of the `images` jobs (a device array), writes output image n of `out`, an [images, out_channels,
// out_size, out_size] tensor of `type` in NCHW (channels_last false) or NHWC memory: the levels that output_pixel
// gives, times scale[c] minus shift[c], and zeros in the channels past 3 (a ResNet stem's padded input).
void crop_resize_normalize(const ResampleJob* jobs, int64_t images, int out_size, void* out,
                           cuda::kernels::OutType type, int out_channels, bool channels_last, const float scale[3],
                           const float shift[3], cudaStream_t stream);

}  // namespace rn50::input::kernels
