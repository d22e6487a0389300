// trainer/executor.h: the model's forward and backward pass: autocast, loss, and evaluation counts.
#pragma once

#include <ATen/core/Tensor.h>

#include <optional>

namespace rn50::models {
class Classifier;
}

namespace rn50::trainer {

// Sums over one evaluation batch, kept on the device until the epoch ends.
struct EvalSums {
  at::Tensor loss;  // sum of per-image losses
  at::Tensor top1;  // correct in the first guess
  at::Tensor top5;  // correct in the first five
  at::Tensor images;  // counted: the batch's positions not labelled data::kSkippedLabel
};

class LossScaler;
struct MixedLabels;

struct ExecutorOptions {
  std::optional<at::ScalarType> autocast;  // half or bfloat16: the forward under CUDA autocast; none: float32
  double label_smoothing = 0;              // of the training loss
};

class Executor {
 public:
  Executor(models::Classifier& model, const ExecutorOptions& options);

  // Forward under the configured precision, cross-entropy with label smoothing, backward (of the
  // scaled loss when a scaler is given). With `mix` (mixup/cutmix), the loss weighs the labels and mix->second by
  // mix->weight and 1 - mix->weight. Returns the unscaled loss as a detached 0-dim float tensor on the device (no host
  // sync).
  at::Tensor forward_backward(const at::Tensor& images, const at::Tensor& labels, const LossScaler* scaler = nullptr,
                              const MixedLabels* mix = nullptr);

  // Forward in inference mode; plain cross-entropy (no smoothing) for the validation loss.
  EvalSums evaluate(const at::Tensor& images, const at::Tensor& labels);

 private:
  at::Tensor forward(const at::Tensor& images);
  models::Classifier& model_;
  bool autocast_;
  at::ScalarType autocast_dtype_;
  double label_smoothing_;
};

}  // namespace rn50::trainer
