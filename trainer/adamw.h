// trainer/adamw.h: AdamW (PyTorch's, decoupled weight decay) with its rate and step count in device tensors, so that
// a captured step follows the schedule and the bias correction.
#pragma once

#include <ATen/core/Tensor.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "trainer/optimizer.h"

namespace rn50::cuda {
class FusedAdamW;
}

namespace rn50::trainer {

class AdamW final : public Optimizer {
 public:
  // The checkpoint's tensors: "adamw.exp_avg.<parameter>", "adamw.exp_avg_sq.<parameter>" and "adamw.step".
  static constexpr char kPrefix[] = "adamw.";

  AdamW(torch::nn::Module& model, const OptimizerOptions& options);
  ~AdamW() override;

  const char* name() const override { return "adamw"; }
  void set_lr(double lr) override;
  // t += 1; p *= 1 - lr * wd; m = b1 m + (1 - b1) g; v = b2 v + (1 - b2) g^2;
  // p -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps), with g the gradient times grad_scale. The first and
  // second moments are float32, like the parameters (the model's master copy: autocast computes in half precision).
  void step(const at::Tensor* found_inf = nullptr, const at::Tensor* grad_scale = nullptr) override;
  void gradients_moved() override;
  std::vector<std::pair<std::string, at::Tensor>> state() const override;

 private:
  bool fused() const override { return fused_ != nullptr; }
  std::vector<at::Tensor> exp_avg_, exp_avg_sq_;  // in parameter order
  double beta1_, beta2_, eps_;
  at::Tensor lr_;     // 0-dim, on the parameters' device
  at::Tensor steps_;  // 0-dim float: updates applied (a skipped fp16 step does not count)
  std::unique_ptr<cuda::FusedAdamW> fused_;
};

}  // namespace rn50::trainer
