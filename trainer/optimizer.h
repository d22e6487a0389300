// trainer/optimizer.h: Optimizer, what the train step updates the parameters with (SGD or AdamW): a learning rate in
// a device tensor, an update that skips itself on an fp16 overflow and scales the gradients for clipping without a
// host sync, its state by name for checkpoints; and make_optimizer, which builds the one the options name.
#pragma once

#include <ATen/core/Tensor.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace torch::nn {
class Module;
}

namespace rn50::trainer {

struct OptimizerOptions {
  enum class Kind { kSgd, kAdamW };
  Kind kind = Kind::kSgd;
  double weight_decay = 1e-4;
  // Every 1-D parameter (norms' weights and biases) gets no weight decay unless this is set; nor do these names.
  bool decay_norms_and_biases = false;
  std::vector<std::string> no_decay;
  double momentum = 0.9;                          // SGD
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;  // AdamW
  // On a CUDA device the update is one fused kernel over all parameters unless false; the ATen sequence is the
  // reference it is tested against (and what runs on the CPU).
  bool fused = true;
};

class Optimizer {
 public:
  virtual ~Optimizer();
  // "sgd" or "adamw": a checkpoint records it, and a resumed run must use the same.
  virtual const char* name() const = 0;
  // Writes the rate into the device tensor the update reads (an asynchronous fill, no host sync).
  virtual void set_lr(double lr) = 0;
  // One update of every parameter that has a gradient. `found_inf` (fp16 loss scaling): the whole update is skipped
  // when it is non-zero. `grad_scale` (gradient clipping): every gradient is multiplied by it first. Both are 0-dim
  // float device tensors or null.
  virtual void step(const at::Tensor* found_inf = nullptr, const at::Tensor* grad_scale = nullptr) = 0;
  // The state a checkpoint keeps and a data-parallel run broadcasts, each under a name that starts with the
  // optimizer's prefix ("momentum." for SGD, "adamw." for AdamW).
  virtual std::vector<std::pair<std::string, at::Tensor>> state() const = 0;

  // For the start-up table: the kind, the kernels and which parameters get no weight decay.
  std::string describe() const;

  // The gradients, in parameter order (for unscaling and clipping).
  std::vector<at::Tensor> grads() const;
  // Zeroes gradients in place, keeping their memory (a captured graph reads fixed addresses).
  void zero_grad();
  // Drops every gradient: the next backward pass writes each one rather than adding it to zeros (autograd keeps the
  // tensor a gradient's producer returned). Captured, the gradients then live in the graph's memory, at the addresses
  // every replay writes; call gradients_moved() before capturing the update.
  void release_grads();
  // The gradients were reallocated since the update last ran: a fused update reads their addresses again now (a host
  // to device copy, so outside any capture).
  virtual void gradients_moved() {}

 protected:
  struct Param {
    std::string name;
    at::Tensor value;
    double weight_decay;
  };
  // The trainable parameters of `model`, each with its weight decay.
  Optimizer(torch::nn::Module& model, const OptimizerOptions& options);
  virtual bool fused() const = 0;
  std::vector<Param> params_;
};

// The optimizer names a checkpoint's state may carry, and the prefixes of their tensors.
bool is_optimizer_state(const std::string& tensor_name);

std::unique_ptr<Optimizer> make_optimizer(torch::nn::Module& model, const OptimizerOptions& options);

// Gradient clipping by global norm, on the device: min(1, max_norm / (||grads||_2 + 1e-6)) as a 0-dim float tensor,
// for Optimizer::step's grad_scale. Inside a captured step it is recomputed each replay; no host sync.
at::Tensor clip_coefficient(const std::vector<at::Tensor>& grads, double max_norm);

}  // namespace rn50::trainer
