// data/transforms.h: crop geometry of RandomResizedCrop and of the validation resize + centre crop.
#pragma once

#include <cstdint>
#include <random>

#include "codecs/jpeg_codec.h"

namespace rn50::data {

// The random stream of one sample: a function of (seed, epoch, sample index) only, so that augmentation
// does not depend on the number of workers or on the order in which they run.
std::mt19937_64 sample_rng(uint64_t seed, uint64_t epoch, uint64_t index);

struct RandomResizedCropSpec {
  double scale_min = 0.08;
  double scale_max = 1.0;
  double ratio_min = 3.0 / 4.0;
  double ratio_max = 4.0 / 3.0;
};

// torchvision's RandomResizedCrop.get_params: 10 tries at a random area and log-uniform aspect ratio,
// then the centre crop clamped to the ratio range.
codecs::CropRect random_resized_crop(int width, int height, const RandomResizedCropSpec& spec, std::mt19937_64& rng);

// The source rectangle that "resize shorter side to resize_size, centre crop crop_size" keeps.
codecs::CropRect center_crop_after_resize(int width, int height, int resize_size, int crop_size);

// ImageNet normalisation constants (RGB), in 0..1 units.
inline constexpr float kImageNetMean[3] = {0.485f, 0.456f, 0.406f};
inline constexpr float kImageNetStd[3] = {0.229f, 0.224f, 0.225f};

}  // namespace rn50::data
