// commands/model_step.h: ModelStep, a registered model's training step on synthetic data as the fastest run takes it:
// the doctor's training rate, and the step `rn50 bench-decode --step-model` runs GPU decoding beside.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace rn50::commands {

// On a GPU with configs/optimized.yaml's compute switches (fp16, channels-last, cuDNN autotuning, CUDA graph unless
// `cuda_graph` is off, fusion: conv, stem_channels 4, batched casts, the stem's BatchNorm in its pool, batch 256; TF32
// and the allocator's expandable segments, which are process-wide and stay set), so
// that what it measures is what the fastest run consumes; fp32 on the CPU, batch 8 (64 px with `quick`, where the
// model takes any size). The step runs on the current stream; on a GPU, call cuda::use_side_stream first (a graph is
// not captured on the default stream).
class ModelStep {
 public:
  static constexpr int64_t kStemChannels = 4;  // configs/optimized.yaml's
  static constexpr int kGpuBatchSize = 256;     // the batch it steps on a GPU

  // What may differ from configs/optimized.yaml's step: for measurements of what the CUDA graph, or its second
  // stream's branches, do to work beside it (bench-decode's --step-eager and --step-wgrad-inline).
  struct Options {
    bool quick = false;
    bool cuda_graph = true;    // off: the step eager
    bool wgrad_stream = true;  // off: the weight gradients in line, one stream (a graph without parallel branches)
  };

  ModelStep(const std::string& model, const std::string& device, const Options& options);
  ~ModelStep();
  ModelStep(const ModelStep&) = delete;
  ModelStep& operator=(const ModelStep&) = delete;

  // Images/s after a warm-up (the graph's capture among them): on a GPU the median of three windows of 11 steps
  // (one with `quick`), each timed from an idle device to its last step's end; `while_busy` runs once while the last
  // window's steps are queued.
  // `windows`: each window's rate, in order.
  double images_per_s(bool quick, const std::function<void()>& while_busy = {}, std::vector<double>* windows = nullptr);

  // Queues one step. Its input buffers keep their synthetic batch: a decode beside it writes its own, so the two
  // share only the device's work, as in training.
  void queue();

  int batch_size() const;
  int64_t image_size() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace rn50::commands
