// tests/input/gpu_decode/test_crop_resample.cpp: the CPU reference of the GPU decode path's crop + resize + flip +
// normalise: its plans follow decode_crop_resize's choices, its resize is cv::resize's, and on real JPEGs it comes out
// close to the CPU path's images.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <opencv2/core.hpp>
#include <opencv2/imgproc.hpp>
#include <random>
#include <string>
#include <vector>

#include "codecs/jpeg_codec.h"
#include "bench/decode/cpu_decode_bench.h"
#include "input/gpu_decode/crop_resample.h"
#include "tests/support/test_support.h"

namespace rn50::input {
namespace {

std::vector<uint8_t> noise_image(int width, int height, uint32_t seed) {
  std::mt19937 gen(seed);
  std::vector<uint8_t> pixels(static_cast<size_t>(width) * height * 3);
  for (uint8_t& p : pixels) p = static_cast<uint8_t>(gen());
  return pixels;
}

std::vector<uint8_t> resampled(const std::vector<uint8_t>& image, int width, int height, const data::SampleGeometry& g,
                               int out_size) {
  std::vector<uint8_t> out(static_cast<size_t>(out_size) * out_size * 3);
  resample_reference(image.data(), plan_resample(width, height, g, out_size), out_size, out.data());
  return out;
}

struct Difference {
  double mean = 0;
  int max = 0;
  double p99 = 0;  // 99th percentile of the absolute differences
};

Difference difference(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b) {
  std::vector<int> d(a.size());
  double total = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    d[i] = std::abs(static_cast<int>(a[i]) - static_cast<int>(b[i]));
    total += d[i];
  }
  Difference out;
  out.mean = total / static_cast<double>(a.size());
  std::sort(d.begin(), d.end());
  out.max = d.back();
  out.p99 = d[d.size() * 99 / 100];
  return out;
}

TEST(CropResample, PlansFollowTheCpuPathsScaleRegionAndInterpolation) {
  // 640x480, crop 400x300 at (100, 60) to 112: scale 4/8 (box 2), region 200x150, bilinear.
  ResamplePlan p = plan_resample(640, 480, {{100, 60, 400, 300}, true}, 112);
  EXPECT_EQ(p.box, 2);
  EXPECT_EQ(p.region_x, 50);
  EXPECT_EQ(p.region_y, 30);
  EXPECT_EQ(p.region_width, 200);
  EXPECT_EQ(p.region_height, 150);
  EXPECT_EQ(p.area, 0);
  EXPECT_EQ(p.flip, 1);
  EXPECT_FLOAT_EQ(p.scale_x, 200.0f / 112);
  // The whole image to 30x30: scale 1/8 (80x60), then area (80 >= 60).
  p = plan_resample(640, 480, {{0, 0, 640, 480}, false}, 30);
  EXPECT_EQ(p.box, 8);
  EXPECT_EQ(p.region_width, 80);
  EXPECT_EQ(p.region_height, 60);
  EXPECT_EQ(p.area, 1);
  // Just under half: full scale, area because the height shrinks 2x or more.
  p = plan_resample(500, 500, {{0, 0, 447, 500}, false}, 224);
  EXPECT_EQ(p.box, 1);
  EXPECT_EQ(p.area, 1);
  // Upscaling: full scale, bilinear.
  p = plan_resample(100, 100, {{5, 7, 50, 40}, false}, 64);
  EXPECT_EQ(p.box, 1);
  EXPECT_EQ(p.area, 0);
  EXPECT_EQ(p.region_x, 5);
  EXPECT_EQ(p.region_height, 40);
  // Odd sizes: libjpeg rounds the scaled size up; the region never leaves it.
  p = plan_resample(1001, 999, {{990, 0, 11, 999}, false}, 8);
  EXPECT_EQ(p.box, 1);  // 11 wide cannot shrink below 8 at any scale but full
  p = plan_resample(1001, 999, {{0, 990, 1001, 9}, false}, 1);
  EXPECT_EQ(p.box, 8);
  EXPECT_LE(p.region_y + p.region_height, (999 + 7) / 8);
  EXPECT_THROW(plan_resample(100, 100, {{50, 50, 51, 10}, false}, 8), std::invalid_argument);
}

TEST(CropResample, IdentityPlanPassesTheImageThrough) {
  const std::vector<uint8_t> image = noise_image(37, 37, 1);
  std::vector<uint8_t> out(image.size());
  resample_reference(image.data(), plan_identity(37), 37, out.data());
  EXPECT_EQ(out, image);
}

// Without DCT scaling (box 1) the reference is cv::resize on the same pixels. Tolerance, on noise (the harshest
// input): at most 1 level apart anywhere, mean below 0.2 (measured 0.13): OpenCV's 8-bit bilinear rounds its
// 11-bit fixed-point weights where the reference computes in float.
TEST(CropResample, AtFullScaleItIsOpenCvsResize) {
  const int w = 600, h = 500;
  std::vector<uint8_t> image = noise_image(w, h, 7);
  const cv::Mat mat(h, w, CV_8UC3, image.data());
  struct Case {
    codecs::CropRect rect;
    int out;
  };
  const Case cases[] = {
      {{5, 7, 50, 40}, 64},        // upscaling
      {{100, 50, 300, 200}, 224},  // shrinking one way, growing the other: bilinear
      {{30, 0, 400, 300}, 224},    // shrinking less than 2x: bilinear
      {{0, 0, 447, 500}, 224},     // shrinking 2x or more in one direction: area, fractional cells
      {{13, 0, 448, 447}, 224},    // area at exactly 2x in x
      {{152, 1, 447, 499}, 224},   // bottom-right corner
  };
  for (const Case& c : cases) {
    for (bool flip : {false, true}) {
      SCOPED_TRACE("rect " + std::to_string(c.rect.width) + "x" + std::to_string(c.rect.height) + " flip " +
                   std::to_string(flip));
      const ResamplePlan plan = plan_resample(w, h, {c.rect, flip}, c.out);
      ASSERT_EQ(plan.box, 1);
      cv::Mat expected;
      cv::resize(mat(cv::Rect(c.rect.x, c.rect.y, c.rect.width, c.rect.height)), expected, cv::Size(c.out, c.out), 0, 0,
                 plan.area ? cv::INTER_AREA : cv::INTER_LINEAR);
      if (flip) cv::flip(expected, expected, 1);
      const std::vector<uint8_t> mine = resampled(image, w, h, {c.rect, flip}, c.out);
      const Difference d = difference(mine, std::vector<uint8_t>(expected.data, expected.data + mine.size()));
      EXPECT_LE(d.max, 1);
      EXPECT_LT(d.mean, 0.2);
    }
  }
}

// The reference on a fully decoded image against the CPU path (region + DCT-scaled libjpeg decode, cv::resize)
// for the crops and flips the training transform draws. libjpeg's reduced IDCTs output the means of 2x2 / 4x4 /
// 8x8 full-size outputs, which the box mean reproduces; what differs is chroma: at reduced scale libjpeg-turbo
// decodes subsampled chroma with a larger IDCT instead of upsampling it, and the full decode upsamples it with
// its triangle filter. Tolerance, on generated ImageNet-like photos (strong per-channel noise over shapes: the
// hard case for chroma) and a smooth image: mean absolute difference below 0.5 levels at full scale (measured
// 0.14, OpenCV's fixed-point rounding) and 3 with DCT scaling (measured at most 2.2, at scale 1/2), and 99% of
// values within 12 levels.
TEST(CropResample, ComesCloseToTheCpuPathOnRealJpegs) {
  std::vector<std::vector<uint8_t>> files = bench::make_benchmark_jpegs(3, 500, 375, 11);
  files.push_back(bench::make_benchmark_jpegs(1, 1024, 768, 12)[0]);
  const std::vector<uint8_t> smooth_pixels = test::smooth_image(640, 480, 0.4);
  files.push_back(codecs::encode_jpeg(smooth_pixels.data(), 640, 480, 3, 90));
  data::SampleTransform transform;
  transform.seed = 3;
  double worst_mean[9] = {0};
  for (size_t f = 0; f < files.size(); ++f) {
    const codecs::JpegInfo info = codecs::read_jpeg_header(files[f].data(), files[f].size());
    std::vector<uint8_t> full(static_cast<size_t>(info.width) * info.height * 3);
    codecs::DecodeScratch scratch;
    codecs::decode_crop_resize(files[f].data(), files[f].size(), {0, 0, info.width, info.height}, info.width,
                               info.height, false, full.data(), scratch);
    for (int out : {224, 64}) {
      transform.image_size = out;
      for (size_t index = 0; index < 12; ++index) {
        const data::SampleGeometry g = data::sample_geometry(transform, info.width, info.height, 0, index);
        const ResamplePlan plan = plan_resample(info.width, info.height, g, out);
        std::vector<uint8_t> cpu(static_cast<size_t>(out) * out * 3);
        codecs::decode_crop_resize(files[f].data(), files[f].size(), g.rect, out, out, g.flip, cpu.data(), scratch);
        const Difference d = difference(resampled(full, info.width, info.height, g, out), cpu);
        SCOPED_TRACE("file " + std::to_string(f) + " out " + std::to_string(out) + " box " + std::to_string(plan.box) +
                     (plan.area ? " area" : " bilinear"));
        EXPECT_LT(d.mean, plan.box == 1 ? 0.5 : 3.0);
        EXPECT_LE(d.p99, 12.0);
        worst_mean[plan.box] = std::max(worst_mean[plan.box], d.mean);
      }
    }
  }
  std::printf("[ measured ] worst mean |reference - CPU path| by box: 1: %.2f, 2: %.2f, 4: %.2f, 8: %.2f\n",
              worst_mean[1], worst_mean[2], worst_mean[4], worst_mean[8]);
}

TEST(CropResample, NormalisedReferenceIsTheUploadersFormula) {
  const int out = 16;
  const std::vector<uint8_t> image = noise_image(40, 30, 5);
  const ResamplePlan plan = plan_resample(40, 30, {{3, 2, 30, 25}, true}, out);
  std::vector<uint8_t> levels(static_cast<size_t>(out) * out * 3);
  resample_reference(image.data(), plan, out, levels.data());
  std::vector<float> planes(levels.size());
  crop_resize_normalize_reference(image.data(), plan, out, planes.data());
  const float mean[3] = {0.485f, 0.456f, 0.406f}, stdev[3] = {0.229f, 0.224f, 0.225f};
  for (int c = 0; c < 3; ++c)
    for (int p = 0; p < out * out; ++p)
      ASSERT_NEAR(planes[static_cast<size_t>(c) * out * out + p],
                  (levels[static_cast<size_t>(p) * 3 + c] / 255.0f - mean[c]) / stdev[c], 1e-5);
}

}  // namespace
}  // namespace rn50::input
