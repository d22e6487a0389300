// commands/model_step.cpp: ModelStep, a registered model's training step on synthetic data (the doctor, bench-decode).
#include "commands/model_step.h"

#include <ATen/ATen.h>
#include <ATen/Context.h>
#include <torch/cuda.h>

#include <algorithm>
#include <vector>

#include "core/clock.h"
#include "cuda/device_ops.h"
#include "models/model.h"
#include "trainer/sgd.h"
#include "trainer/step_timer.h"
#include "trainer/train_step.h"

namespace rn50::commands {

struct ModelStep::Impl {
  static constexpr double kLr = 0.01;
  c10::Device device{c10::kCPU};
  std::shared_ptr<models::Classifier> model;
  std::unique_ptr<trainer::Sgd> sgd;
  std::unique_ptr<trainer::StepTimer> timer;
  std::unique_ptr<trainer::TrainStep> step;
  int batch = 0;
  int64_t image_size = 0;

  void sync() const {
    if (device.is_cuda()) torch::cuda::synchronize(device.index());
  }
};

ModelStep::ModelStep(const std::string& name, const std::string& device, const Options& step_options)
    : impl_(std::make_unique<Impl>()) {
  const bool quick = step_options.quick;
  Impl& m = *impl_;
  m.device = c10::Device(device);
  const bool gpu = m.device.is_cuda();
  at::globalContext().setBenchmarkCuDNN(gpu);
  if (gpu) {
    // configs/optimized.yaml's tf32 and expandable_segments, as its run sets them (trainer/session.cpp); process-wide.
    at::globalContext().setAllowTF32CuBLAS(true);
    at::globalContext().setAllowTF32CuDNN(true);
    cuda::use_expandable_segments();
  }
  models::ModelOptions model_options;
  // fusion: conv falls back to bn, then off, as in training.
  model_options.fusion = gpu ? models::Fusion::kConv : models::Fusion::kOff;
  model_options.stem_channels = gpu ? kStemChannels : 3;
  model_options.batched_casts = gpu;
  model_options.fuse_stem_pool = gpu;
  model_options.wgrad_stream = step_options.wgrad_stream;
  m.model = models::create(name, model_options);
  trainer::StepOptions options;
  options.batch_size = gpu ? kGpuBatchSize : 8;
  const int64_t fixed = m.model->fixed_image_size();
  options.image_size = fixed > 0 ? fixed : (gpu ? 224 : (quick ? 64 : 224));
  options.input_dtype = gpu ? at::kHalf : at::kFloat;
  options.channels_last = gpu;
  options.image_channels = models::input_channels(name, model_options.stem_channels);
  options.loss_scaling = gpu;
  options.cuda_graph = gpu && step_options.cuda_graph;
  if (gpu) options.executor.autocast = at::kHalf;
  options.executor.label_smoothing = 0.1;
  m.model->to(m.device);
  if (gpu) models::to_channels_last(*m.model);
  m.sgd = std::make_unique<trainer::Sgd>(*m.model, 0.9, 1e-4, false);
  m.timer = gpu ? trainer::make_cuda_step_timer()
                : std::unique_ptr<trainer::StepTimer>(std::make_unique<trainer::HostStepTimer>());
  m.step = std::make_unique<trainer::TrainStep>(*m.model, *m.sgd, options, m.device, *m.timer);
  m.batch = options.batch_size;
  m.image_size = options.image_size;
  m.step->images().normal_();
  if (options.image_channels > 3)  // as the sources write them
    m.step->images().narrow(1, 3, options.image_channels - 3).zero_();
  m.step->labels().random_(0, 1000);
}

ModelStep::~ModelStep() = default;

double ModelStep::images_per_s(bool quick, const std::function<void()>& while_busy, std::vector<double>* windows) {
  Impl& m = *impl_;
  const bool gpu = m.device.is_cuda();
  const int warmup = gpu ? 8 : 1, steps = gpu ? 10 : (quick ? 2 : 4);
  // The median of three windows on a GPU, so that one disturbed window does not set the rate: the doctor's single
  // window, right after its matrix products, read 2.3% below training's rate on an H100 twice (docs/doctor.md).
  // while_busy (the NVML reading under load) runs in the last, when the device has been busy for two windows.
  const int window_count = gpu && !quick ? 3 : 1;
  for (int i = 0; i < warmup; ++i) queue();
  std::vector<double> rates;
  for (int w = 0; w < window_count; ++w) {
    m.sync();
    const auto t = Clock::now();
    for (int i = 0; i < steps; ++i) queue();
    if (w == window_count - 1 && while_busy) while_busy();  // the device busy since two windows
    m.step->run(Impl::kLr).item<double>();  // waits for the device
    rates.push_back((steps + 1) * m.batch / seconds_since(t));
  }
  m.timer->take_totals();
  if (windows) *windows = rates;
  std::sort(rates.begin(), rates.end());
  return rates[rates.size() / 2];
}

void ModelStep::queue() { impl_->step->run(Impl::kLr); }

int ModelStep::batch_size() const { return impl_->batch; }

int64_t ModelStep::image_size() const { return impl_->image_size; }

}  // namespace rn50::commands
