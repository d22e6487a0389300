// trainer/loss_scaler.cpp: fp16 loss scaling with ATen's fused AMP kernels.
#include "trainer/loss_scaler.h"

#include <ATen/ATen.h>

namespace rn50::trainer {

LossScaler::LossScaler(c10::Device device, double initial_scale) {
  const auto options = at::TensorOptions(device).dtype(at::kFloat);
  scale_ = at::full({}, initial_scale, options);
  inv_scale_ = at::full({}, 1.0 / initial_scale, options);
  found_inf_ = at::zeros({}, options);
  growth_tracker_ = at::zeros({}, options.dtype(at::kInt));
}

at::Tensor LossScaler::scale(const at::Tensor& loss) const { return loss * scale_; }

void LossScaler::unscale_and_check(const std::vector<at::Tensor>& grads) {
  found_inf_.zero_();
  at::reciprocal_out(inv_scale_, scale_);
  at::_amp_foreach_non_finite_check_and_unscale_(grads, found_inf_, inv_scale_);
}

void LossScaler::update() {
  at::_amp_update_scale_(scale_, growth_tracker_, found_inf_, /*growth=*/2.0, /*backoff=*/0.5, /*interval=*/2000);
}

}  // namespace rn50::trainer
