// models/stem.cpp: the stem convolution with zero-padded input channels.
#include "models/stem.h"

#include <ATen/ATen.h>

#include <vector>

namespace rn50::models {

at::Tensor stem_conv(const at::Tensor& images, const at::Tensor& weight, int64_t channels) {
  const int64_t pad = channels - images.size(1);
  if (pad <= 0) return at::conv2d(images, weight, {}, {2, 2}, {3, 3});
  // Pads run from the last dimension back: W, H, then C (after the existing channels).
  const std::vector<int64_t> zeros = {0, 0, 0, 0, 0, pad};
  return at::conv2d(at::constant_pad_nd(images, zeros), at::constant_pad_nd(weight, zeros), {}, {2, 2}, {3, 3});
}

}  // namespace rn50::models
