// input/gpu_decode/crop_resample.h: the host side of the GPU decode path's crop + resize + flip + normalisation: the
// plan of each image (see input/gpu_decode/resample_math.h) and the CPU reference that the CUDA kernel mirrors, for
// tests.
#pragma once

#include <cstdint>

#include "data/dataset.h"
#include "input/gpu_decode/resample_math.h"

namespace rn50::input {

// The plan for a whole decoded width x height image (RGB, rows of width * 3 bytes) and the crop and flip that
// the CPU path would apply for an out_size x out_size output. Throws std::invalid_argument when the crop is not
// inside the image.
ResamplePlan plan_resample(int width, int height, const data::SampleGeometry& geometry, int out_size);

// The plan that passes an image through unchanged: for images that were already cropped, resized and flipped
// to out_size x out_size on the CPU (decode_crop_resize, the fallback for what nvJPEG cannot decode).
ResamplePlan plan_identity(int out_size);

// Makes `plan` read a decoded YCbCr (or grey) image as packed planes, the layout the GPU decoder gives nvJPEG's
// planar output: Y (width x height), then Cb, then Cr (each chroma_width x chroma_height), rows unpadded, one chroma
// sample per step_x x step_y pixels (1 or 2; step_x 0: grey, Y only).
void use_packed_planes(ResamplePlan& plan, int step_x, int step_y, int chroma_width, int chroma_height);

// Per-channel affine of the ImageNet normalisation on whole levels x: x * scale[c] - shift[c], which is
// (x / 255 - mean) / std; the same constants as the CPU path's upload (input/upload.cpp).
struct Normalization {
  float scale[3];
  float shift[3];
};
Normalization imagenet_normalization();

// CPU references of what the kernel computes for one image: the resampled levels (out_size x out_size x 3,
// HWC), and those normalised into planes (3 x out_size x out_size floats, CHW).
void resample_reference(const uint8_t* image, const ResamplePlan& plan, int out_size, uint8_t* out_hwc);
void crop_resize_normalize_reference(const uint8_t* image, const ResamplePlan& plan, int out_size, float* out_chw);

}  // namespace rn50::input
