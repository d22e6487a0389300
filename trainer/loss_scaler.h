// trainer/loss_scaler.h: dynamic loss scaling for fp16, kept on the device so that a captured step needs no host sync.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <vector>

namespace rn50::trainer {

// PyTorch's GradScaler policy: start at 2^16, halve on overflow (skipping that update), double after
// 2000 clean steps. The overflow flag stays a device tensor that the optimizer reads.
class LossScaler {
 public:
  explicit LossScaler(c10::Device device, double initial_scale = 65536.0);
  at::Tensor scale(const at::Tensor& loss) const;
  // Divides the gradients by the scale in place and sets found_inf to 1 if any is inf or NaN.
  void unscale_and_check(const std::vector<at::Tensor>& grads);
  // Grows or backs off the scale from found_inf.
  void update();
  const at::Tensor& found_inf() const { return found_inf_; }
  const at::Tensor& current_scale() const { return scale_; }
  const at::Tensor& growth_tracker() const { return growth_tracker_; }

 private:
  at::Tensor scale_, inv_scale_, found_inf_, growth_tracker_;
};

}  // namespace rn50::trainer
