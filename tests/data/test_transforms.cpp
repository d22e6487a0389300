// tests/data/test_transforms.cpp: tests of sample_rng, RandomResizedCrop geometry and the validation centre crop.
#include "data/transforms.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include <gtest/gtest.h>

#include "core/errors.h"
#include "data/random_draws.h"

namespace rn50::data {
namespace {

bool inside(const codecs::CropRect& r, int width, int height) {
  return r.width > 0 && r.height > 0 && r.x >= 0 && r.y >= 0 && r.x + r.width <= width && r.y + r.height <= height;
}

TEST(Transforms, RandomCropsStayInsideTheImage) {
  const RandomResizedCropSpec spec;
  std::mt19937_64 sizes(11);
  for (int trial = 0; trial < 3000; ++trial) {
    const int width = 1 + static_cast<int>(detail::uniform_below(sizes, trial % 3 == 0 ? 12 : 2000));
    const int height = 1 + static_cast<int>(detail::uniform_below(sizes, trial % 5 == 0 ? 12 : 2000));
    std::mt19937_64 rng = sample_rng(trial, trial % 7, trial * 13);
    const codecs::CropRect r = random_resized_crop(width, height, spec, rng);
    ASSERT_TRUE(inside(r, width, height))
        << width << "x" << height << " -> " << r.x << "," << r.y << " " << r.width << "x" << r.height;
  }
  // Extreme shapes take the clamped-ratio fallback; still inside, ratio at the limit.
  std::mt19937_64 rng(5);
  const codecs::CropRect tall = random_resized_crop(10, 1000, spec, rng);
  EXPECT_TRUE(inside(tall, 10, 1000));
  EXPECT_EQ(tall.width, 10);
  EXPECT_EQ(tall.height, 13);  // round(10 / (3/4))
  EXPECT_EQ(tall.y, (1000 - 13) / 2);
  const codecs::CropRect wide = random_resized_crop(1000, 10, spec, rng);
  EXPECT_EQ(wide.height, 10);
  EXPECT_EQ(wide.width, 13);  // round(10 * 4/3)
  EXPECT_EQ(wide.x, (1000 - 13) / 2);
}

TEST(Transforms, AreaAndAspectFollowTheSpec) {
  const RandomResizedCropSpec spec;
  const int width = 1000, height = 1000;  // square: the fit test favours neither orientation
  const int draws = 20000;
  double area_sum = 0, log_aspect_sum = 0;
  int below_one = 0;
  for (int i = 0; i < draws; ++i) {
    std::mt19937_64 rng = sample_rng(42, 0, i);
    const codecs::CropRect r = random_resized_crop(width, height, spec, rng);
    const double area = static_cast<double>(r.width) * r.height / (static_cast<double>(width) * height);
    const double aspect = static_cast<double>(r.width) / r.height;
    // Rounding the sides to whole pixels moves area and aspect a little past the nominal limits.
    ASSERT_GE(area, 0.08 * 0.99);
    ASSERT_LE(area, 1.0);
    ASSERT_GE(aspect, 0.75 * 0.99);
    ASSERT_LE(aspect, 4.0 / 3.0 * 1.01);
    area_sum += area;
    log_aspect_sum += std::log(aspect);
    below_one += aspect < 1.0;
  }
  // Crops that do not fit are re-drawn, which favours small areas: the mean falls below (0.08 + 1) / 2.
  const double mean_area = area_sum / draws;
  EXPECT_GT(mean_area, 0.40);
  EXPECT_LT(mean_area, 0.54);
  // log-uniform aspect ratio over a range symmetric in log space: mean near 0, half below 1.
  EXPECT_NEAR(log_aspect_sum / draws, 0.0, 0.02);
  EXPECT_NEAR(static_cast<double>(below_one) / draws, 0.5, 0.03);
}

// With scale at most 0.5 every first draw fits a square image (area * ratio <= 0.5 * 4/3 < 1), so the crops
// show the spec's distributions themselves: area uniform on [0.08, 0.5], log aspect uniform on
// [log 3/4, log 4/3]. Tolerance: each of 10 equal bins holds 10% +- 1.2% of 20000 draws (about 5 standard
// deviations of a binomial count; whole-pixel rounding moves a crop by under 0.3% of its area or aspect).
TEST(Transforms, AreaAndAspectAreUniformWhereEveryDrawFits) {
  RandomResizedCropSpec spec;
  spec.scale_max = 0.5;
  const int side = 2000, draws = 20000, bins = 10;
  std::vector<int> area_bins(bins, 0), aspect_bins(bins, 0);
  const double log_lo = std::log(spec.ratio_min), log_hi = std::log(spec.ratio_max);
  for (int i = 0; i < draws; ++i) {
    std::mt19937_64 rng = sample_rng(4, 1, i);
    const codecs::CropRect r = random_resized_crop(side, side, spec, rng);
    const double area = static_cast<double>(r.width) * r.height / (static_cast<double>(side) * side);
    const double log_aspect = std::log(static_cast<double>(r.width) / r.height);
    const double u_area = (area - spec.scale_min) / (spec.scale_max - spec.scale_min);
    const double u_aspect = (log_aspect - log_lo) / (log_hi - log_lo);
    ++area_bins[std::clamp(static_cast<int>(u_area * bins), 0, bins - 1)];
    ++aspect_bins[std::clamp(static_cast<int>(u_aspect * bins), 0, bins - 1)];
  }
  for (int b = 0; b < bins; ++b) {
    EXPECT_NEAR(area_bins[b], draws / bins, 0.012 * draws) << "area bin " << b;
    EXPECT_NEAR(aspect_bins[b], draws / bins, 0.012 * draws) << "aspect bin " << b;
  }
}

TEST(Transforms, OffsetsCoverTheWholeRange) {
  // randint(0, W - w) is inclusive at both ends: a crop can touch either edge.
  RandomResizedCropSpec spec;
  spec.scale_min = spec.scale_max = 0.25;
  spec.ratio_min = spec.ratio_max = 1.0;
  bool left = false, right = false;
  for (int i = 0; i < 2000 && !(left && right); ++i) {
    std::mt19937_64 rng = sample_rng(1, 2, i);
    const codecs::CropRect r = random_resized_crop(20, 20, spec, rng);
    ASSERT_EQ(r.width, 10);
    left |= r.x == 0;
    right |= r.x == 10;
  }
  EXPECT_TRUE(left);
  EXPECT_TRUE(right);
}

TEST(Transforms, SampleRngIsAFunctionOfItsArgumentsOnly) {
  std::vector<uint64_t> forward(100), backward(100);
  for (int i = 0; i < 100; ++i) forward[i] = sample_rng(9, 3, i)();
  for (int i = 99; i >= 0; --i) {
    std::mt19937_64 other = sample_rng(1, 1, 1);  // unrelated draws in between change nothing
    other();
    backward[i] = sample_rng(9, 3, i)();
  }
  EXPECT_EQ(forward, backward);
  // Each argument matters, and their roles are not interchangeable.
  const uint64_t base = sample_rng(1, 2, 3)();
  EXPECT_NE(base, sample_rng(2, 2, 3)());
  EXPECT_NE(base, sample_rng(1, 3, 3)());
  EXPECT_NE(base, sample_rng(1, 2, 4)());
  EXPECT_NE(sample_rng(0, 1, 0)(), sample_rng(0, 0, 1)());
  EXPECT_NE(sample_rng(1, 0, 0)(), sample_rng(0, 1, 0)());
  // The same crop for the same sample, every time.
  std::mt19937_64 a = sample_rng(5, 6, 7), b = sample_rng(5, 6, 7);
  const codecs::CropRect ra = random_resized_crop(640, 480, RandomResizedCropSpec{}, a);
  const codecs::CropRect rb = random_resized_crop(640, 480, RandomResizedCropSpec{}, b);
  EXPECT_EQ(ra.x, rb.x);
  EXPECT_EQ(ra.y, rb.y);
  EXPECT_EQ(ra.width, rb.width);
  EXPECT_EQ(ra.height, rb.height);
}

TEST(Transforms, PortableDrawsAreInRangeAndUnbiased) {
  std::mt19937_64 rng(1);
  std::vector<int> counts(6, 0);
  for (int i = 0; i < 60000; ++i) {
    const int64_t v = detail::uniform_int(rng, -2, 3);
    ASSERT_GE(v, -2);
    ASSERT_LE(v, 3);
    ++counts[static_cast<size_t>(v + 2)];
    const double u = detail::uniform_unit(rng);
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
  }
  for (int c : counts) EXPECT_NEAR(c, 10000, 400);
  EXPECT_EQ(detail::uniform_below(rng, 1), 0u);
}

TEST(Transforms, CenterCropOfKnownSizes) {
  // 500x375, resize 256, crop 224: scale 256/375, side 224 * 375/256 = 328.1 -> 328.
  codecs::CropRect r = center_crop_after_resize(500, 375, 256, 224);
  EXPECT_EQ(r.width, 328);
  EXPECT_EQ(r.height, 328);
  EXPECT_EQ(r.x, 86);  // (500 - 328) / 2
  EXPECT_EQ(r.y, 24);  // round(23.5) = 24, Python rounds half to even
  r = center_crop_after_resize(375, 500, 256, 224);
  EXPECT_EQ(r.x, 24);
  EXPECT_EQ(r.y, 86);
  EXPECT_EQ(r.width, 328);
  r = center_crop_after_resize(256, 256, 256, 224);
  EXPECT_EQ(r.x, 16);
  EXPECT_EQ(r.y, 16);
  EXPECT_EQ(r.width, 224);
  r = center_crop_after_resize(333, 301, 256, 224);  // side = 224 * 301/256 = 263.4 -> 263; x: round(35) ; y: round(19)
  EXPECT_EQ(r.width, 263);
  EXPECT_EQ(r.x, 35);
  EXPECT_EQ(r.y, 19);
  r = center_crop_after_resize(335, 300, 256, 224);  // side 262.5 -> 262 (half to even); x: round(36.5) = 36
  EXPECT_EQ(r.width, 262);
  EXPECT_EQ(r.x, 36);
  EXPECT_EQ(r.y, 19);
  // A crop larger than the resized image is clamped to the image.
  r = center_crop_after_resize(100, 50, 200, 224);
  EXPECT_EQ(r.height, 50);
  EXPECT_EQ(r.width, 56);  // 224 * 50/200
  EXPECT_EQ(r.x, 22);
  EXPECT_EQ(r.y, 0);
}

TEST(Transforms, RejectsNonsenseSpecs) {
  std::mt19937_64 rng(1);
  RandomResizedCropSpec spec;
  spec.scale_min = 0.9;
  spec.scale_max = 0.5;
  EXPECT_THROW(random_resized_crop(100, 100, spec, rng), ConfigError);
  spec = RandomResizedCropSpec{};
  spec.ratio_min = 0.0;
  EXPECT_THROW(random_resized_crop(100, 100, spec, rng), ConfigError);
  EXPECT_THROW(center_crop_after_resize(100, 100, 0, 224), ConfigError);
}

}  // namespace
}  // namespace rn50::data
