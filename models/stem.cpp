// models/stem.cpp: the stem convolution with zero-padded input channels.
#include "models/stem.h"

#include <ATen/ATen.h>


namespace rn50::models {

at::Tensor pad_channels(const at::Tensor& t, int64_t channels) {
  const int64_t pad = channels - t.size(1);
  if (pad <= 0) return t;
  // Pads run from the last dimension back: W, H, then C (after the existing channels). constant_pad_nd allocates its
  // output in its input's suggested memory format.
  return at::constant_pad_nd(t, {0, 0, 0, 0, 0, pad});
}

at::Tensor stem_conv(const at::Tensor& images, const at::Tensor& weight, int64_t channels) {
  TORCH_CHECK(images.dim() == 4 && images.size(1) <= channels, "the stem takes at most ", channels,
              " image channels, got images of shape ", images.sizes());
  return at::conv2d(pad_channels(images, channels), pad_channels(weight, channels), {}, {2, 2}, {3, 3});
}

}  // namespace rn50::models
