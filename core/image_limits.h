// core/image_limits.h: the default bounds on one image, shared by the configuration's keys and data::SampleLimits.
#pragma once

#include <cstdint>

namespace rn50 {

// The keys max_image_bytes and max_image_pixels: a photo is a few MB; the pixel bound is Pillow's decompression-bomb
// limit, which a 12000x12000 photo (144 M pixels) stays under and a 2 KB file claiming 60000x60000 does not.
inline constexpr int64_t kDefaultMaxImageBytes = int64_t{64} << 20;
inline constexpr int64_t kDefaultMaxImagePixels = 178956970;

}  // namespace rn50
