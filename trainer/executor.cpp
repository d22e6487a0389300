// trainer/executor.cpp: forward, loss and backward of one batch; evaluation of one batch.
#include "trainer/executor.h"

#include <torch/nn/functional/loss.h>
#include <torch/utils.h>

#include "core/torch_compat.h"
#include "data/dataset.h"
#include "models/model.h"
#include "trainer/loss_scaler.h"
#include "trainer/mixup.h"

namespace rn50::trainer {

Executor::Executor(models::Classifier& model, const ExecutorOptions& options)
    : model_(model),
      autocast_(options.autocast.has_value()),
      autocast_dtype_(options.autocast.value_or(at::kFloat)),
      label_smoothing_(options.label_smoothing) {}

namespace {

// Autocast on for a scope; off again and its cast cache cleared on every exit, exceptions included (a
// failed graph capture leaves casts that were recorded but never run in the cache).
class AutocastScope {
 public:
  explicit AutocastScope(at::ScalarType dtype) : dtype_(dtype) { compat::set_cuda_autocast(true, dtype_); }
  ~AutocastScope() {
    compat::set_cuda_autocast(false, dtype_);
    compat::clear_autocast_cache();
  }
  AutocastScope(const AutocastScope&) = delete;
  AutocastScope& operator=(const AutocastScope&) = delete;

 private:
  at::ScalarType dtype_;
};

}  // namespace

at::Tensor Executor::forward(const at::Tensor& images) {
  if (!autocast_) return model_.forward(images);
  at::Tensor logits;
  {
    AutocastScope scope(autocast_dtype_);
    logits = model_.forward(images);
  }
  return logits.to(at::kFloat);
}

at::Tensor Executor::forward_backward(const at::Tensor& images, const at::Tensor& labels, const LossScaler* scaler,
                                      const MixedLabels* mix) {
  namespace F = torch::nn::functional;
  model_.train();
  const at::Tensor logits = forward(images);
  const auto smoothed = F::CrossEntropyFuncOptions().label_smoothing(label_smoothing_);
  at::Tensor loss = F::cross_entropy(logits, labels, smoothed);
  // Cross-entropy is linear in its target: weighing the two losses is the loss of the mixed soft labels.
  if (mix) loss = loss * mix->weight + F::cross_entropy(logits, mix->second, smoothed) * (1 - mix->weight);
  if (scaler) {
    scaler->scale(loss).backward();
  } else {
    loss.backward();
  }
  return loss.detach();
}

EvalSums Executor::evaluate(const at::Tensor& images, const at::Tensor& labels) {
  namespace F = torch::nn::functional;
  torch::NoGradGuard no_grad;
  model_.eval();
  const at::Tensor logits = forward(images);
  EvalSums sums;
  // A position labelled data::kSkippedLabel (a validation image that could not be decoded) adds nothing: the loss
  // ignores it (cross_entropy's ignore_index), no class index equals it, and it is not counted.
  sums.loss = F::cross_entropy(logits, labels,
                               F::CrossEntropyFuncOptions().reduction(torch::kSum).ignore_index(data::kSkippedLabel));
  sums.images = labels.ne(data::kSkippedLabel).sum().to(at::kFloat);
  const int64_t k = std::min<int64_t>(5, logits.size(1));
  const at::Tensor top = std::get<1>(logits.topk(k, 1));  // [N, k] class indices, best first
  const at::Tensor hits = top.eq(labels.unsqueeze(1));
  sums.top1 = hits.narrow(1, 0, 1).sum().to(at::kFloat);
  sums.top5 = hits.sum().to(at::kFloat);
  return sums;
}

}  // namespace rn50::trainer
