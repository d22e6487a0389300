// data/transforms.cpp: per-sample random streams and the crop geometry of torchvision's RandomResizedCrop and
// Resize + CenterCrop, computed in source-image pixels.
#include "data/transforms.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "core/errors.h"
#include "data/random_draws.h"

namespace rn50::data {
namespace {

// Python's round(): halves go to the even neighbour (the default floating-point rounding mode).
int round_half_even(double value) { return static_cast<int>(std::nearbyint(value)); }

}  // namespace

std::mt19937_64 sample_rng(uint64_t seed, uint64_t epoch, uint64_t index) {
  // A constant first value keeps these streams apart from other seeds drawn from the same (seed, epoch).
  return std::mt19937_64(detail::mix_seed({0x73616d706c65ULL /* "sample" */, seed, epoch, index}));
}

codecs::CropRect random_resized_crop(int width, int height, const RandomResizedCropSpec& spec, std::mt19937_64& rng) {
  if (width <= 0 || height <= 0) throw std::invalid_argument("random_resized_crop: the image is empty");
  if (!(spec.scale_min > 0.0 && spec.scale_min <= spec.scale_max && spec.scale_max <= 1.0))
    throw ConfigError("random resized crop: scale range must satisfy 0 < min <= max <= 1 (got " +
                      std::to_string(spec.scale_min) + ", " + std::to_string(spec.scale_max) + ")");
  if (!(spec.ratio_min > 0.0 && spec.ratio_min <= spec.ratio_max))
    throw ConfigError("random resized crop: ratio range must satisfy 0 < min <= max (got " +
                      std::to_string(spec.ratio_min) + ", " + std::to_string(spec.ratio_max) + ")");

  const double area = static_cast<double>(width) * height;
  const double log_ratio_min = std::log(spec.ratio_min);
  const double log_ratio_max = std::log(spec.ratio_max);
  for (int attempt = 0; attempt < 10; ++attempt) {
    const double target_area = area * detail::uniform_real(rng, spec.scale_min, spec.scale_max);
    const double aspect = std::exp(detail::uniform_real(rng, log_ratio_min, log_ratio_max));
    const int crop_width = round_half_even(std::sqrt(target_area * aspect));
    const int crop_height = round_half_even(std::sqrt(target_area / aspect));
    if (crop_width > 0 && crop_width <= width && crop_height > 0 && crop_height <= height) {
      codecs::CropRect rect;
      rect.y = static_cast<int>(detail::uniform_int(rng, 0, height - crop_height));  // torchvision draws i first
      rect.x = static_cast<int>(detail::uniform_int(rng, 0, width - crop_width));
      rect.width = crop_width;
      rect.height = crop_height;
      return rect;
    }
  }
  // Fallback: the whole image, cut to the nearest allowed aspect ratio, centred.
  const double in_ratio = static_cast<double>(width) / height;
  int crop_width = width;
  int crop_height = height;
  if (in_ratio < spec.ratio_min) {
    crop_height = std::clamp(round_half_even(crop_width / spec.ratio_min), 1, height);
  } else if (in_ratio > spec.ratio_max) {
    crop_width = std::clamp(round_half_even(crop_height * spec.ratio_max), 1, width);
  }
  codecs::CropRect rect;
  rect.x = (width - crop_width) / 2;
  rect.y = (height - crop_height) / 2;
  rect.width = crop_width;
  rect.height = crop_height;
  return rect;
}

codecs::CropRect center_crop_after_resize(int width, int height, int resize_size, int crop_size) {
  if (width <= 0 || height <= 0) throw std::invalid_argument("center_crop_after_resize: the image is empty");
  if (resize_size <= 0 || crop_size <= 0)
    throw ConfigError("validation resize and crop sizes must be positive (got " + std::to_string(resize_size) + ", " +
                      std::to_string(crop_size) + ")");
  // The shorter side becomes resize_size; the crop covers crop_size of those pixels.
  const double scale = static_cast<double>(resize_size) / std::min(width, height);
  const int side = std::max(1, round_half_even(crop_size / scale));
  codecs::CropRect rect;
  rect.width = std::min(side, width);
  rect.height = std::min(side, height);
  rect.x = round_half_even((width - rect.width) / 2.0);
  rect.y = round_half_even((height - rect.height) / 2.0);
  return rect;
}

}  // namespace rn50::data
