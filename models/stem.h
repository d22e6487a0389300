// models/stem.h: stem_conv, ResNet's stem convolution (7x7, stride 2, padding 3) with the image's channels
// zero-padded to more (stem_channels), so that cuDNN may pick its channels-last kernels for 4 or 8 channels instead of
// those for 3, which a profile suggests are slow (docs/switches.md, stem_channels).
#pragma once

#include <ATen/core/Tensor.h>

namespace rn50::models {

// conv2d(images, weight, stride 2, padding 3), with images [N, C, H, W] and weight [F, C', 7, 7] each given zero
// channels up to `channels` first: the same output and, through the padding's backward, the same weight gradient.
// Images that come with `channels` channels already (the training sources write them, the channels past C' zero) are
// not copied; any finite values there give the same result, as they meet zero weights.
at::Tensor stem_conv(const at::Tensor& images, const at::Tensor& weight, int64_t channels);

// t [N, C, H, W] with zero channels after its C up to `channels` (t itself when it has as many): a copy in t's memory
// format, so that a channels-last image reaches cuDNN as channels-last (else it would transpose it first).
at::Tensor pad_channels(const at::Tensor& t, int64_t channels);

}  // namespace rn50::models
