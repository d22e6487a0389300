// trainer/train_step.cpp: eager and graph-replayed training steps.
#include "trainer/train_step.h"

#include <ATen/ATen.h>

#include "core/log.h"
#include "cuda/device_ops.h"
#include "models/model.h"
#include "parallel/grad_sync.h"
#include "trainer/executor.h"
#include "trainer/loss_scaler.h"
#include "trainer/optimizer.h"
#include "trainer/step_timer.h"

namespace rn50::trainer {

TrainStep::TrainStep(models::Classifier& model, Optimizer& optimizer, const StepOptions& options, c10::Device device,
                     StepTimer& timer)
    : model_(model),
      optimizer_(optimizer),
      timer_(timer),
      executor_(std::make_unique<Executor>(model, options.executor)),
      clip_grad_norm_(options.clip_grad_norm),
      mixup_(options.mixup) {
  // The input arrives in the autocast dtype: the first convolution would cast it anyway.
  const auto on_device = at::TensorOptions(device);
  images_ = at::zeros({options.batch_size, options.image_channels, options.image_size, options.image_size},
                      on_device.dtype(options.input_dtype));
  if (options.channels_last) images_ = images_.contiguous(at::MemoryFormat::ChannelsLast);
  labels_ = at::zeros({options.batch_size}, on_device.dtype(at::kLong));
  loss_ = at::zeros({}, on_device.dtype(at::kFloat));
  if (options.loss_scaling) scaler_ = std::make_unique<LossScaler>(device);
  if (options.cuda_graph) {
    want_graph_ = true;
    if (!device.is_cuda()) {
      want_graph_ = false;
      graph_status_ = "eager: CUDA graphs need a CUDA device, this run is on the CPU";
    } else if (!options.no_graph.empty()) {
      want_graph_ = false;
      graph_status_ = "eager: " + options.no_graph;
    } else {
      graph_status_ = "eager until capture after " + std::to_string(warmup_steps_) + " warm-up steps";
    }
  }
}

TrainStep::~TrainStep() = default;

std::vector<std::pair<std::string, at::Tensor>> TrainStep::state() const {
  if (!scaler_) return {};
  return {{"loss_scale", scaler_->current_scale()}, {"loss_scale_growth_tracker", scaler_->growth_tracker()}};
}

// `timed`: not under capture, where the step timer's events cannot be recorded.
void TrainStep::forward_backward(bool timed) {
  if (gradient_sync_) {
    gradient_sync_->zero_gradients();
  } else {
    optimizer_.zero_grad();
  }
  if (mixup_.enabled()) {
    const MixedLabels mix = mix_batch(images_, labels_, mixup_);
    loss_.copy_(executor_->forward_backward(images_, labels_, scaler_.get(), &mix));
  } else {
    loss_.copy_(executor_->forward_backward(images_, labels_, scaler_.get()));
  }
  if (gradient_sync_) {
    if (timed) timer_.mark(Phase::kForwardBackward);
    gradient_sync_->finish();  // what is left of the all-reduces after the backward pass
    if (timed) timer_.mark(Phase::kCommunication);
  }
  if (scaler_) scaler_->unscale_and_check(optimizer_.grads());
}

void TrainStep::update() {
  // The clipping factor from the unscaled gradients (and, under data parallel, the averaged ones), on the device.
  const at::Tensor clip = clip_grad_norm_ > 0 ? clip_coefficient(optimizer_.grads(), clip_grad_norm_) : at::Tensor();
  optimizer_.step(scaler_ ? &scaler_->found_inf() : nullptr, clip.defined() ? &clip : nullptr);
  if (scaler_) scaler_->update();
}

const at::Tensor& TrainStep::run(double lr) {
  optimizer_.set_lr(lr);  // an eager fill of the device tensor the (captured) update reads
  if (graphed()) {
    graph_forward_backward_->replay();
    timer_.mark(Phase::kForwardBackward);
    graph_update_->replay();
    timer_.mark(Phase::kOptimizer);
  } else {
    forward_backward(/*timed=*/true);
    timer_.mark(Phase::kForwardBackward);
    update();
    timer_.mark(Phase::kOptimizer);
    if (want_graph_ && ++steps_ == warmup_steps_) try_capture();
  }
  return loss_;
}

void TrainStep::try_capture() {
  want_graph_ = false;
  auto forward_backward_graph = std::make_unique<cuda::CudaGraph>();
  auto update_graph = std::make_unique<cuda::CudaGraph>();
  // Alone (data parallel's buckets keep gradients of their own), the captured backward writes each gradient instead of
  // adding it to a zeroed one: one fill and one addition fewer per parameter and step.
  const bool write_gradients = gradient_sync_ == nullptr;
  if (write_gradients) optimizer_.release_grads();
  try {
    forward_backward_graph->capture([this] { forward_backward(/*timed=*/false); });
    if (write_gradients) optimizer_.gradients_moved();
    update_graph->capture([this] { update(); });
  } catch (const std::exception& e) {
    // Eager steps go on with gradients of their own (a failed capture's hold memory the graph never wrote).
    if (write_gradients) optimizer_.release_grads();
    if (gradient_sync_) {
      // Every rank must replay the same collectives: one rank falling back to eager steps while the others
      // replay graphs would hang them. Stop instead.
      gradient_sync_->reset();
      throw std::runtime_error(std::string("cuda_graph: capture failed in a data-parallel run: ") + e.what() +
                               "; run without cuda_graph");
    }
    graph_status_ = std::string("eager: CUDA graph capture failed: ") + e.what();
    log_warn("cuda_graph: " + graph_status_);
    return;
  }
  graph_forward_backward_ = std::move(forward_backward_graph);
  graph_update_ = std::move(update_graph);
  // The graphs own their memory now; what the eager warm-up steps cached would otherwise stay reserved.
  cuda::release_cached_memory();
  graph_status_ = "captured after " + std::to_string(warmup_steps_) + " eager steps; replaying";
  log_info("cuda_graph: " + graph_status_);
}

}  // namespace rn50::trainer
