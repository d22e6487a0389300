// trainer/sgd.h: momentum SGD (PyTorch's, dampening 0) whose learning rate lives in a device tensor, so that a
// captured step still follows the schedule.
#pragma once

#include <ATen/core/Tensor.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "trainer/optimizer.h"

namespace rn50::cuda {
class FusedSgd;
}

namespace rn50::trainer {

class Sgd final : public Optimizer {
 public:
  static constexpr char kPrefix[] = "momentum.";  // the checkpoint's tensors: "momentum.<parameter name>"

  Sgd(torch::nn::Module& model, const OptimizerOptions& options);
  // The same with SGD's settings alone (tests).
  Sgd(torch::nn::Module& model, double momentum, double weight_decay, bool decay_bn_and_bias, bool fused = true);
  ~Sgd() override;

  const char* name() const override { return "sgd"; }
  void set_lr(double lr) override;
  // buf = momentum * buf + g + wd * p;  p -= lr * buf, with g the gradient times grad_scale.
  void step(const at::Tensor* found_inf = nullptr, const at::Tensor* grad_scale = nullptr) override;
  void gradients_moved() override;
  std::vector<std::pair<std::string, at::Tensor>> state() const override;

 private:
  bool fused() const override { return fused_ != nullptr; }
  std::vector<at::Tensor> buffers_;  // momentum, in parameter order
  double momentum_;
  at::Tensor neg_lr_;  // 0-dim, on the parameters' device
  std::unique_ptr<cuda::FusedSgd> fused_;
};

}  // namespace rn50::trainer
