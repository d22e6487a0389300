// cuda/device_ops.h: CUDA-side pieces of the training step: side stream, graphs, input normalisation, the fused SGD
// and AdamW updates.
#pragma once

#include <ATen/core/Tensor.h>

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace rn50::cuda {

// Makes a pool stream current for this thread on `device`: graph capture refuses the default stream, and
// every eager step (warm-up included) must run on the stream the capture will use.
void use_side_stream(int device);

// Takes `count` of LibTorch's high-priority pool streams on `device` and drops them, so that the next ones taken (GPU
// decoding's) are further along the pool and land on other CUDA hardware queues: a probe of which queue meets the
// captured step's branches (rn50 bench-decode --decode-stream-offset).
void skip_high_priority_streams(int device, int count);

// Writes normalised images (x / 255 - mean) / std from device uint8 NHWC into `out`, a preallocated
// [N, C, H, W] float, half or bfloat16 tensor in NCHW or channels-last layout, in one kernel; C is 3, or up to 8 with
// zeros past the third (a ResNet stem's padded input).
void normalize_into(const at::Tensor& images_u8_nhwc, at::Tensor& out, const float scale[3], const float shift[3]);

// The table a fused update reads: every parameter's value, gradient and state buffers by address, in chunks for the
// kernel's blocks. Built on first use, once the gradients exist, and again only when an address changes (gradients
// are zeroed in place, so they do not).
class UpdateTable;

// The fused SGD update over every parameter in one launch (see kernels.h).
class FusedSgd {
 public:
  FusedSgd(std::vector<at::Tensor> params, std::vector<at::Tensor> buffers, std::vector<double> weight_decay,
           double momentum);
  ~FusedSgd();
  // found_inf and grad_scale: 0-dim float device tensors or null (see trainer::Optimizer::step).
  void step(const at::Tensor& neg_lr, const at::Tensor* found_inf, const at::Tensor* grad_scale);
  // Reads the gradients' addresses again (they moved); outside a capture.
  void refresh();

 private:
  std::unique_ptr<UpdateTable> table_;
  double momentum_;
};

// The fused AdamW update over every parameter in one launch; the rate and the step count are device tensors.
class FusedAdamW {
 public:
  FusedAdamW(std::vector<at::Tensor> params, std::vector<at::Tensor> exp_avg, std::vector<at::Tensor> exp_avg_sq,
             std::vector<double> weight_decay, double beta1, double beta2, double eps);
  ~FusedAdamW();
  void step(const at::Tensor& lr, const at::Tensor& steps, const at::Tensor* found_inf, const at::Tensor* grad_scale);
  void refresh();  // as FusedSgd::refresh

 private:
  std::unique_ptr<UpdateTable> table_;
  double beta1_, beta2_, eps_;
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

// Asks the caching allocator for segments that grow in place (less memory lost to fragmentation); returns what it
// uses now, for the start-up table. Applies to segments allocated from here on: call before the model is built.
std::string use_expandable_segments();

// Returns the caching allocator's unused blocks to the device (after graph capture, warm-up's activations).
void release_cached_memory();

// rn50's own kernels: how they were built and whether the device runs native code or driver-compiled PTX.
std::string describe_kernels(int device);

}  // namespace rn50::cuda
