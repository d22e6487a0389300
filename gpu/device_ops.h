// gpu/device_ops.h: CUDA-side pieces of the training step: side stream, graphs, async upload, fused ops, event timer.
#pragma once

#include <ATen/core/Tensor.h>

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "data/loader.h"
#include "trainer/step_timer.h"

namespace rn50::gpu {

// Makes a pool stream current for this thread on `device`: graph capture refuses the default stream, and
// every eager step (warm-up included) must run on the stream the capture will use.
void use_side_stream(int device);

// Writes normalised images (x / 255 - mean) / std from device uint8 NHWC into `out`, a preallocated
// [N, 3, H, W] float, half or bfloat16 tensor in NCHW or channels-last layout, in one kernel.
void normalize_into(const at::Tensor& images_u8_nhwc, at::Tensor& out, const float scale[3], const float shift[3]);

// The fused SGD update over every parameter in one launch (see kernels.h). Built on first use, once the
// gradients exist; their addresses must not change afterwards (they do not: gradients are zeroed in place).
class FusedSgd {
 public:
  FusedSgd(std::vector<at::Tensor> params, std::vector<at::Tensor> buffers, std::vector<double> weight_decay,
           double momentum);
  ~FusedSgd();
  void step(const at::Tensor& neg_lr, const at::Tensor* found_inf);

 private:
  struct Table;
  std::unique_ptr<Table> table_;
};

// A captured CUDA graph of `body`, replayed on the current stream. capture() throws std::runtime_error
// with the reason when capture fails, leaving the stream usable for eager work.
class CudaGraph {
 public:
  CudaGraph();
  ~CudaGraph();
  void capture(const std::function<void()>& body);
  void replay();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Host-to-device copies of uint8 batches on a separate copy stream, `slots` batches in flight; the
// compute stream waits for a batch's copy event before using it. Host buffers come back to the loader
// once their copy has finished.
class AsyncUploader {
 public:
  AsyncUploader(int device, int batch_size, int image_size, int slots);
  ~AsyncUploader();
  // Enqueues the copy and returns the device tensors (uint8 NHWC images, int64 labels), ready on the
  // current stream. `release` is called with the batch once its copy is known to be complete.
  std::pair<at::Tensor, at::Tensor> upload(const data::HostBatch& batch, const std::function<void(const data::HostBatch&)>& release);
  // Releases every batch still in flight (waits for their copies).
  void drain();
  // Seconds the copy stream spent copying since the last call.
  double take_copy_seconds();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// StepTimer on CUDA events of the current stream.
std::unique_ptr<trainer::StepTimer> make_cuda_step_timer();

// Returns the caching allocator's unused blocks to the device (after graph capture, warm-up's activations).
void release_cached_memory();

// rn50's own kernels: how they were built and whether the device runs native code or driver-compiled PTX.
std::string describe_kernels(int device);

}  // namespace rn50::gpu
