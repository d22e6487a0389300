// trainer/train_step.h: one optimisation step (zero_grad, mixup/cutmix, forward, backward, loss scaling, clipping,
// update), run eagerly or replayed from a CUDA graph captured after warm-up, with a logged reason when it cannot be.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "trainer/executor.h"
#include "trainer/mixup.h"

namespace rn50 {
namespace models {
class Classifier;
}
namespace cuda {
class CudaGraph;
}
namespace parallel {
class GradientBuckets;
}
}  // namespace rn50

namespace rn50::trainer {

class LossScaler;
class Optimizer;
class StepTimer;

struct StepOptions {
  int batch_size = 256;  // per process
  int image_size = 224;
  at::ScalarType input_dtype =
      at::kFloat;  // the step's input: the autocast dtype (the first convolution's), or float32
  bool channels_last = false;
  int64_t image_channels = 3;  // 3, or the stem's zero-padded channels that the sources write (models::input_channels)
  bool loss_scaling = false;   // fp16: a dynamic loss scale, the update skipped on overflow
  bool cuda_graph = false;     // capture the whole step after warm-up and replay it
  std::string no_graph;        // why this step cannot be captured (Gloo's host-blocking all-reduce); empty: it can
  double clip_grad_norm = 0;   // > 0: gradients scaled to at most this global L2 norm before the update
  MixupOptions mixup;
  ExecutorOptions executor;
};

class TrainStep {
 public:
  TrainStep(models::Classifier& model, Optimizer& optimizer, const StepOptions& options, c10::Device device,
            StepTimer& timer);
  ~TrainStep();

  // The inputs the step reads. Write the next batch into them (copy_ or a kernel) before run(); under a
  // CUDA graph their addresses are baked into the graph.
  at::Tensor& images() { return images_; }
  at::Tensor& labels() { return labels_; }

  // Runs one step at learning rate `lr` and returns the loss (0-dim, on the device; not synced).
  const at::Tensor& run(double lr);

  // Data parallel: gradients are averaged over the ranks by `buckets` after each backward pass (and
  // inside the captured graph). Set before the first run().
  void set_gradient_sync(parallel::GradientBuckets* buckets) { gradient_sync_ = buckets; }

  // The forward/backward executor, shared with evaluation.
  Executor& executor() { return *executor_; }

  bool graphed() const { return graph_forward_backward_ != nullptr; }
  // State a checkpoint must keep for a resumed run to continue identically (the fp16 loss scaler's).
  std::vector<std::pair<std::string, at::Tensor>> state() const;
  // Why the step is not graphed, when cuda_graph was asked for (empty otherwise).
  const std::string& graph_status() const { return graph_status_; }

 private:
  void forward_backward(bool timed);
  void update();
  void try_capture();

  models::Classifier& model_;
  Optimizer& optimizer_;
  StepTimer& timer_;
  std::unique_ptr<Executor> executor_;
  std::unique_ptr<LossScaler> scaler_;
  double clip_grad_norm_ = 0;
  MixupOptions mixup_;
  parallel::GradientBuckets* gradient_sync_ = nullptr;
  at::Tensor images_, labels_, loss_;
  bool want_graph_ = false;
  int warmup_steps_ = 3;  // eager steps before capture: cuDNN's benchmark search and lazy allocations finish here
  int64_t steps_ = 0;
  std::unique_ptr<cuda::CudaGraph> graph_forward_backward_, graph_update_;
  std::string graph_status_;
};

}  // namespace rn50::trainer
