// trainer/mixup.h: mixup and cutmix on the device: each training batch is blended with itself in reverse order,
// whole (mixup) or in a box (cutmix), and the loss weighs both label sets by the share each image keeps, as timm's
// Mixup does per batch. Every draw is a device tensor: no host sync, and a captured step draws anew each replay.
#pragma once

#include <ATen/core/Tensor.h>

namespace rn50::trainer {

struct MixupOptions {
  double mixup_alpha = 0;    // Beta(alpha, alpha) for mixup's weight; 0: no mixup
  double cutmix_alpha = 0;   // Beta(alpha, alpha) for cutmix's box area; 0: no cutmix
  double prob = 1.0;         // the chance that a batch is mixed at all
  double switch_prob = 0.5;  // with both on, the chance that a mixed batch takes cutmix
  bool enabled() const { return mixup_alpha > 0 || cutmix_alpha > 0; }
};

// What the loss needs of a mixed batch: the second label of each image (the batch's labels reversed) and the weight
// of the first, a 0-dim float device tensor (1 where the batch was not mixed).
struct MixedLabels {
  at::Tensor second;
  at::Tensor weight;
};

// Mixes `images` ([N, C, H, W], any float dtype and layout) in place and returns the labels' mix.
MixedLabels mix_batch(at::Tensor& images, const at::Tensor& labels, const MixupOptions& options);

}  // namespace rn50::trainer
