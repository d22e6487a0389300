// trainer/mixup.cpp: the draws, the box and the blend of mix_batch, in device ops alone.
#include "trainer/mixup.h"

#include <ATen/ATen.h>
#include <torch/utils.h>

namespace rn50::trainer {
namespace {

// Beta(alpha, alpha) as X / (X + Y) with X, Y ~ Gamma(alpha): a 0-dim float device tensor.
at::Tensor beta(double alpha, const at::TensorOptions& options) {
  const at::Tensor a = at::full({2}, alpha, options);
  const at::Tensor g = at::_standard_gamma(a);
  return g[0] / (g[0] + g[1]).clamp_min(1e-12);
}

}  // namespace

MixedLabels mix_batch(at::Tensor& images, const at::Tensor& labels, const MixupOptions& options) {
  torch::NoGradGuard no_grad;
  const auto f32 = at::TensorOptions(images.device()).dtype(at::kFloat);
  const int64_t h = images.size(2), w = images.size(3);
  // u[0]: mixup or cutmix; u[1]: mixed at all; u[2], u[3]: the box's centre.
  const at::Tensor u = at::rand({4}, f32);
  const at::Tensor flipped = images.flip({0});
  const at::Tensor applied = u[1] < options.prob;
  at::Tensor use_cutmix = at::full({}, options.cutmix_alpha > 0, f32.dtype(at::kBool));
  if (options.mixup_alpha > 0 && options.cutmix_alpha > 0) use_cutmix = u[0] < options.switch_prob;

  at::Tensor mixed = images, weight = at::ones({}, f32);
  if (options.mixup_alpha > 0) {
    const at::Tensor lam = beta(options.mixup_alpha, f32);
    const at::Tensor blend = images * lam.to(images.scalar_type()) + flipped * (1 - lam).to(images.scalar_type());
    mixed = blend;
    weight = lam;
  }
  if (options.cutmix_alpha > 0) {
    // timm's box: sides sqrt(1 - lam) of the image's, centred uniformly, cut at the borders; the weight is what the
    // image keeps of itself after the cut.
    const at::Tensor lam = beta(options.cutmix_alpha, f32);
    const at::Tensor ratio = (1 - lam).sqrt();
    const at::Tensor cut_h = (ratio * h).floor(), cut_w = (ratio * w).floor();
    const at::Tensor cy = (u[2] * h).floor(), cx = (u[3] * w).floor();
    const at::Tensor y1 = (cy - (cut_h / 2).floor()).clamp(0, h), y2 = (cy + (cut_h / 2).floor()).clamp(0, h);
    const at::Tensor x1 = (cx - (cut_w / 2).floor()).clamp(0, w), x2 = (cx + (cut_w / 2).floor()).clamp(0, w);
    const at::Tensor rows = at::arange(h, f32).view({h, 1}), cols = at::arange(w, f32).view({1, w});
    const at::Tensor box = ((rows >= y1) & (rows < y2) & (cols >= x1) & (cols < x2)).view({1, 1, h, w});
    const at::Tensor cut = at::where(box, flipped, images);
    const at::Tensor kept = 1 - (y2 - y1) * (x2 - x1) / static_cast<double>(h * w);
    mixed = at::where(use_cutmix, cut, mixed);
    weight = at::where(use_cutmix, kept, weight);
  }
  images.copy_(at::where(applied, mixed, images));
  return {labels.flip({0}), at::where(applied, weight, at::ones({}, f32))};
}

}  // namespace rn50::trainer
