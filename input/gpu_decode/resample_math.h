// input/gpu_decode/resample_math.h: the per-pixel arithmetic of the GPU decode path's crop + resize + flip, written
// once for the CPU reference (input/gpu_decode/crop_resample.cpp) and the CUDA kernel
// (input/gpu_decode/crop_resize_kernel.cu). No LibTorch and no CUDA headers: nvcc compiles it for the device, any C++17
// compiler for the host.
#pragma once

#include <math.h>
#include <stdint.h>

#if defined(__CUDACC__)
#define RN50_HOST_DEVICE __host__ __device__
#else
#define RN50_HOST_DEVICE
#endif

namespace rn50::input {

// How one output image is made from a whole decoded image, mirroring
// decode_crop_resize: libjpeg's DCT scaling by 1/box is emulated by the mean of box x box source pixels (what a
// scaled inverse DCT approximates); the crop's region of that scaled image is resized as cv::resize does it
// (INTER_AREA when shrinking in both directions and 2x or more in one, INTER_LINEAR otherwise, half-pixel
// centres); the result is mirrored when `flip`. Plain ints and floats, so that it copies to the device as is.
// The decoded image is interleaved RGB (`pitch` bytes per row), or, with `planar`, the planes a JPEG stores, as
// nvJPEG hands them out for NVJPEG_OUTPUT_YUV: a Y plane of width x height (`pitch` bytes per row) at the image's
// start, and Cb and Cr planes of chroma_width x chroma_height at cb_offset and cr_offset, one sample per
// chroma_step_x x chroma_step_y pixels (chroma_pitch bytes per row; chroma_step_x 0: grey, Y only).
struct ResamplePlan {
  int32_t width = 0, height = 0;  // the decoded image
  int32_t pitch = 0;              // bytes per row (of the Y plane when planar)
  int32_t planar = 0;
  int32_t chroma_step_x = 0, chroma_step_y = 0;  // 1 or 2 pixels per chroma sample; 0: grey
  int32_t chroma_width = 0, chroma_height = 0, chroma_pitch = 0;
  int64_t cb_offset = 0, cr_offset = 0;                                     // bytes from the image's start
  int32_t box = 1;                                                          // 1, 2, 4 or 8
  int32_t region_x = 0, region_y = 0, region_width = 0, region_height = 0;  // in scaled pixels
  int32_t area = 0;                                                         // 1: area resampling; 0: bilinear
  int32_t flip = 0;
  float scale_x = 1.0f, scale_y = 1.0f;  // region pixels per output pixel
};

namespace resample {

RN50_HOST_DEVICE inline int min_int(int a, int b) { return a < b ? a : b; }

RN50_HOST_DEVICE inline int clamp_int(int v, int lo, int hi) { return v < lo ? lo : (v > hi ? hi : v); }

// One sample of a chroma plane, the plane's edge repeated beyond it.
RN50_HOST_DEVICE inline int chroma_sample(const uint8_t* plane, const ResamplePlan& p, int cx, int cy) {
  return plane[static_cast<int64_t>(clamp_int(cy, 0, p.chroma_height - 1)) * p.chroma_pitch +
               clamp_int(cx, 0, p.chroma_width - 1)];
}

// A chroma plane's value at full-resolution pixel (x, y), upsampled as libjpeg does by default ("fancy"
// upsampling, jdsample.c), in its integer arithmetic: for 2x, 3/4 of the nearest sample and 1/4 of the next one
// toward the pixel, with libjpeg's alternating rounding biases. (libjpeg repeats samples instead for planes at most
// 2 samples wide: the GPU decoder sends such images to nvJPEG's RGB output.)
RN50_HOST_DEVICE inline int chroma_at(const uint8_t* plane, const ResamplePlan& p, int x, int y) {
  const int sx = p.chroma_step_x, sy = p.chroma_step_y;
  if (sx == 1 && sy == 1) return chroma_sample(plane, p, x, y);
  const int i = x / sx, j = y / sy;
  const int ni = sx == 2 ? ((x & 1) ? i + 1 : i - 1) : i;  // the next sample toward the pixel
  const int nj = sy == 2 ? ((y & 1) ? j + 1 : j - 1) : j;
  if (sy == 1) return (3 * chroma_sample(plane, p, i, j) + chroma_sample(plane, p, ni, j) + ((x & 1) ? 2 : 1)) >> 2;
  if (sx == 1) return (3 * chroma_sample(plane, p, i, j) + chroma_sample(plane, p, i, nj) + ((y & 1) ? 2 : 1)) >> 2;
  const int here = 3 * chroma_sample(plane, p, i, j) + chroma_sample(plane, p, i, nj);
  const int next = 3 * chroma_sample(plane, p, ni, j) + chroma_sample(plane, p, ni, nj);
  return (3 * here + next + ((x & 1) ? 7 : 8)) >> 4;
}

// Pixel (x, y) of the decoded image in RGB levels. Planar: JPEG's YCbCr to RGB (JFIF, full range) in libjpeg's
// fixed point (jdcolor.c: 16 fraction bits, each product rounded), clamped to 0..255.
RN50_HOST_DEVICE inline void source_pixel(const uint8_t* image, const ResamplePlan& p, int x, int y, float rgb[3]) {
  if (!p.planar) {
    const uint8_t* px = image + static_cast<int64_t>(y) * p.pitch + 3 * x;
    rgb[0] = px[0];
    rgb[1] = px[1];
    rgb[2] = px[2];
    return;
  }
  if (p.chroma_step_x == 0) {
    rgb[0] = rgb[1] = rgb[2] = image[static_cast<int64_t>(y) * p.pitch + x];
    return;
  }
  const int y_level = image[static_cast<int64_t>(y) * p.pitch + x];
  const int cb = chroma_at(image + p.cb_offset, p, x, y) - 128;
  const int cr = chroma_at(image + p.cr_offset, p, x, y) - 128;
  const int levels[3] = {y_level + ((91881 * cr + 32768) >> 16),                // 1.40200 Cr
                         y_level + ((-22554 * cb - 46802 * cr + 32768) >> 16),  // -0.34414 Cb - 0.71414 Cr
                         y_level + ((116130 * cb + 32768) >> 16)};              // 1.77200 Cb
  for (int c = 0; c < 3; ++c) rgb[c] = static_cast<float>(clamp_int(levels[c], 0, 255));
}

// Pixel (sx, sy) of the image scaled by 1/box: the mean of its box, cut at the image's edge, rounded to a
// whole level as libjpeg's scaled IDCT hands out bytes.
RN50_HOST_DEVICE inline void scaled_pixel(const uint8_t* image, const ResamplePlan& p, int sx, int sy, float rgb[3]) {
  if (p.box == 1) {
    source_pixel(image, p, sx, sy, rgb);
    return;
  }
  const int x0 = sx * p.box, y0 = sy * p.box;
  const int x1 = min_int(x0 + p.box, p.width), y1 = min_int(y0 + p.box, p.height);
  float sum[3] = {0.0f, 0.0f, 0.0f};
  for (int y = y0; y < y1; ++y) {
    for (int x = x0; x < x1; ++x) {
      float px[3];
      source_pixel(image, p, x, y, px);
      sum[0] += px[0];
      sum[1] += px[1];
      sum[2] += px[2];
    }
  }
  const float count = static_cast<float>((x1 - x0) * (y1 - y0));
  for (int c = 0; c < 3; ++c) rgb[c] = rintf(sum[c] / count);
}

// cv::resize INTER_LINEAR's two source taps for output index `o`: half-pixel centres, clamped to the edges.
RN50_HOST_DEVICE inline void linear_taps(int o, float scale, int size, int& i0, int& i1, float& w1) {
  const float f = (static_cast<float>(o) + 0.5f) * scale - 0.5f;
  int i = static_cast<int>(floorf(f));
  float w = f - static_cast<float>(i);
  if (i < 0) {
    i = 0;
    w = 0.0f;
  }
  if (i >= size - 1) {
    i = size - 1;
    w = 0.0f;
  }
  i0 = i;
  i1 = min_int(i + 1, size - 1);
  w1 = w;
}

RN50_HOST_DEVICE inline void bilinear_pixel(const uint8_t* image, const ResamplePlan& p, int ox, int oy, float rgb[3]) {
  int x0, x1, y0, y1;
  float wx, wy;
  linear_taps(ox, p.scale_x, p.region_width, x0, x1, wx);
  linear_taps(oy, p.scale_y, p.region_height, y0, y1, wy);
  float a[3], b[3], c[3], d[3];
  scaled_pixel(image, p, p.region_x + x0, p.region_y + y0, a);
  scaled_pixel(image, p, p.region_x + x1, p.region_y + y0, b);
  scaled_pixel(image, p, p.region_x + x0, p.region_y + y1, c);
  scaled_pixel(image, p, p.region_x + x1, p.region_y + y1, d);
  for (int k = 0; k < 3; ++k) {
    const float top = a[k] + wx * (b[k] - a[k]);
    const float bottom = c[k] + wx * (d[k] - c[k]);
    rgb[k] = top + wy * (bottom - top);
  }
}

// cv::resize INTER_AREA when shrinking: the mean over the cells [o * scale, (o + 1) * scale), partly covered
// cells weighted by the part covered.
RN50_HOST_DEVICE inline void area_pixel(const uint8_t* image, const ResamplePlan& p, int ox, int oy, float rgb[3]) {
  const float x_lo = static_cast<float>(ox) * p.scale_x;
  const float x_hi = fminf(x_lo + p.scale_x, static_cast<float>(p.region_width));
  const float y_lo = static_cast<float>(oy) * p.scale_y;
  const float y_hi = fminf(y_lo + p.scale_y, static_cast<float>(p.region_height));
  const int x_first = static_cast<int>(floorf(x_lo)), x_end = min_int(static_cast<int>(ceilf(x_hi)), p.region_width);
  const int y_first = static_cast<int>(floorf(y_lo)), y_end = min_int(static_cast<int>(ceilf(y_hi)), p.region_height);
  float sum[3] = {0.0f, 0.0f, 0.0f};
  for (int y = y_first; y < y_end; ++y) {
    const float wy = fminf(static_cast<float>(y + 1), y_hi) - fmaxf(static_cast<float>(y), y_lo);
    for (int x = x_first; x < x_end; ++x) {
      const float w = wy * (fminf(static_cast<float>(x + 1), x_hi) - fmaxf(static_cast<float>(x), x_lo));
      float px[3];
      scaled_pixel(image, p, p.region_x + x, p.region_y + y, px);
      for (int k = 0; k < 3; ++k) sum[k] += w * px[k];
    }
  }
  const float covered = (x_hi - x_lo) * (y_hi - y_lo);
  for (int k = 0; k < 3; ++k) rgb[k] = sum[k] / covered;
}

// Output pixel (ox, oy) of an out_size-wide image, in whole levels 0..255 (as floats): what decode_crop_resize
// would have written there, up to the differences of the two decoders.
RN50_HOST_DEVICE inline void output_pixel(const uint8_t* image, const ResamplePlan& p, int ox, int oy, int out_size,
                                          float rgb[3]) {
  const int x = p.flip ? out_size - 1 - ox : ox;  // the CPU path mirrors after resizing
  if (p.area)
    area_pixel(image, p, x, oy, rgb);
  else
    bilinear_pixel(image, p, x, oy, rgb);
  for (int k = 0; k < 3; ++k) rgb[k] = fminf(fmaxf(rintf(rgb[k]), 0.0f), 255.0f);
}

}  // namespace resample
}  // namespace rn50::input
