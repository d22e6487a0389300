// trainer/sgd.h: momentum SGD whose learning rate lives in a device tensor, so a captured step still follows the
// schedule.
#pragma once

#include <ATen/core/Tensor.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace torch::nn {
class Module;
}

namespace rn50::cuda {
class FusedSgd;
}

namespace rn50::trainer {

class Sgd {
 public:
  // Parameters of `model`; BatchNorm parameters and biases (1-D tensors) get no weight decay unless
  // `decay_bn_and_bias`.
  // On a CUDA device the update is one fused kernel over all parameters unless `fused` is false; the
  // ATen sequence is the reference it is tested against.
  Sgd(torch::nn::Module& model, double momentum, double weight_decay, bool decay_bn_and_bias, bool fused = true);
  ~Sgd();

  // Writes the rate into the device tensor the update reads (an asynchronous fill, no host sync).
  void set_lr(double lr);
  // buf = momentum * buf + grad + wd * p;  p -= lr * buf  (PyTorch's SGD with dampening 0).
  // With `found_inf` (fp16 loss scaling), the whole update is skipped when it is non-zero, without a sync.
  void step(const at::Tensor* found_inf = nullptr);
  // The gradients, in parameter order (for unscaling).
  std::vector<at::Tensor> grads() const;
  // Zeroes gradients in place, keeping their memory (a captured graph reads fixed addresses).
  void zero_grad();

  // Momentum buffers by parameter name, for checkpoints.
  const std::vector<std::pair<std::string, at::Tensor>>& momentum_buffers() const { return buffers_; }

 private:
  struct Param {
    at::Tensor value;
    at::Tensor buffer;
    double weight_decay;
  };
  std::vector<Param> params_;
  std::vector<std::pair<std::string, at::Tensor>> buffers_;
  double momentum_;
  at::Tensor neg_lr_;  // 0-dim, on the parameters' device
  std::unique_ptr<cuda::FusedSgd> fused_;
};

}  // namespace rn50::trainer
