// engine/executor.h: the model's forward and backward pass: autocast, loss, and evaluation counts.
#pragma once

#include <ATen/core/Tensor.h>

namespace rn50 {
struct Config;
enum class Precision;
namespace models {
class Classifier;
}
}  // namespace rn50

namespace rn50::engine {

// Sums over one evaluation batch, kept on the device until the epoch ends.
struct EvalSums {
  at::Tensor loss;  // sum of per-image losses
  at::Tensor top1;  // correct in the first guess
  at::Tensor top5;  // correct in the first five
};

class LossScaler;

// The dtype the step computes in and its input arrives in: half or bfloat16 under autocast, float32 otherwise.
at::ScalarType compute_dtype(Precision precision);

class Executor {
 public:
  Executor(models::Classifier& model, const Config& config);

  // Forward under the configured precision, cross-entropy with label smoothing, backward (of the
  // scaled loss when a scaler is given). Returns the unscaled loss as a detached 0-dim float tensor on
  // the device (no host sync).
  at::Tensor forward_backward(const at::Tensor& images, const at::Tensor& labels, const LossScaler* scaler = nullptr);

  // Forward in inference mode; plain cross-entropy (no smoothing) for the validation loss.
  EvalSums evaluate(const at::Tensor& images, const at::Tensor& labels);

 private:
  at::Tensor forward(const at::Tensor& images);
  models::Classifier& model_;
  bool autocast_;
  at::ScalarType autocast_dtype_;
  double label_smoothing_;
};

}  // namespace rn50::engine
