// cuda/device_ops.cpp: side stream, normalisation, the fused SGD and AdamW updates and CUDA graphs (CUDA build).
#include "cuda/device_ops.h"

#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/CUDAGraph.h>
#include <c10/core/AllocatorConfig.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGraphsC10Utils.h>
#include <c10/cuda/CUDAStream.h>

#include <stdexcept>
#include <utility>

#include "core/errors.h"
#include "cuda/cuda_check.h"
#include "cuda/kernels.h"

namespace rn50::cuda {

void use_side_stream(int device) {
  c10::cuda::set_device(static_cast<c10::DeviceIndex>(device));
  c10::cuda::setCurrentCUDAStream(
      c10::cuda::getStreamFromPool(/*isHighPriority=*/false, static_cast<c10::DeviceIndex>(device)));
}

void skip_high_priority_streams(int device, int count) {
  for (int i = 0; i < count; ++i)
    (void)c10::cuda::getStreamFromPool(/*isHighPriority=*/true, static_cast<c10::DeviceIndex>(device));
}

void normalize_into(const at::Tensor& images, at::Tensor& out, const float scale[3], const float shift[3]) {
  TORCH_CHECK(images.is_cuda() && images.scalar_type() == at::kByte && images.dim() == 4 && images.size(3) == 3 &&
                  images.is_contiguous(),
              "normalize_into: expected contiguous uint8 NHWC images on the GPU");
  TORCH_CHECK(out.is_cuda() && out.dim() == 4 && out.size(0) == images.size(0) && out.size(1) >= 3 &&
                  out.size(1) <= 8 && out.size(2) == images.size(1) && out.size(3) == images.size(2),
              "normalize_into: output must be [N, C, H, W] matching the images, C from 3 to 8");
  const bool channels_last = !out.is_contiguous() && out.is_contiguous(at::MemoryFormat::ChannelsLast);
  TORCH_CHECK(channels_last || out.is_contiguous(), "normalize_into: output must be NCHW or channels-last contiguous");
  kernels::OutType type = kernels::OutType::F32;
  if (out.scalar_type() == at::kHalf)
    type = kernels::OutType::F16;
  else if (out.scalar_type() == at::kBFloat16)
    type = kernels::OutType::BF16;
  else
    TORCH_CHECK(out.scalar_type() == at::kFloat, "normalize_into: output must be float, half or bfloat16");
  kernels::normalize_images(images.data_ptr<uint8_t>(), out.data_ptr(), type, images.size(0), images.size(1),
                            images.size(2), static_cast<int>(out.size(1)), channels_last, scale, shift,
                            at::cuda::getCurrentCUDAStream());
}

// ---- fused updates -----------------------------------------------------------------------------------

class UpdateTable {
 public:
  UpdateTable(std::vector<at::Tensor> params, std::vector<std::vector<at::Tensor>> states,
              std::vector<double> weight_decay)
      : params_(std::move(params)), states_(std::move(states)), weight_decay_(std::move(weight_decay)) {}

  // Rebuilds the table when an address changed (copies to the device: not under capture).
  void refresh() {
    if (current_addresses() != addresses_) build();
  }

  // The chunks for this step; rebuilt (a host-side pointer comparison, no device sync) when an address changed.
  kernels::UpdateChunks chunks(const at::Tensor* found_inf, const at::Tensor* grad_scale) {
    if (current_addresses() != addresses_) {
      TORCH_CHECK(c10::cuda::currentStreamCaptureStatusMayInitCtx() == c10::cuda::CaptureStatus::None,
                  "a fused update's gradients moved while a CUDA graph is being captured: call "
                  "Optimizer::gradients_moved() before capturing the update");
      build();
    }
    kernels::UpdateChunks c{};
    c.slices = reinterpret_cast<const kernels::UpdateSlice*>(slices_.data_ptr());
    c.chunk_tensor = chunk_tensor_.data_ptr<int32_t>();
    c.chunk_begin = chunk_begin_.data_ptr<int64_t>();
    c.num_chunks = num_chunks_;
    c.chunk_size = kChunk;
    c.found_inf = found_inf ? found_inf->data_ptr<float>() : nullptr;
    c.grad_scale = grad_scale ? grad_scale->data_ptr<float>() : nullptr;
    return c;
  }

 private:
  static constexpr int64_t kChunk = 16384;

  float* state(size_t s, size_t i) const { return s < states_.size() ? states_[s][i].data_ptr<float>() : nullptr; }

  void build() {
    std::vector<kernels::UpdateSlice> host;
    std::vector<int32_t> tensor_of_chunk;
    std::vector<int64_t> begin_of_chunk;
    addresses_ = current_addresses();
    for (size_t i = 0; i < params_.size(); ++i) {
      const at::Tensor& g = params_[i].grad();
      if (!g.defined()) continue;  // a parameter without a gradient is left alone, as the ATen path does
      // The update is elementwise: any dense layout works, as long as value, gradient and state share its memory
      // order. (Strides alone can differ where a dimension has size 1, as in a 1x1 convolution's weight.)
      const auto format = params_[i].suggest_memory_format();
      bool dense = g.scalar_type() == at::kFloat && params_[i].is_contiguous(format) && g.is_contiguous(format);
      for (const auto& s : states_) dense = dense && s[i].is_contiguous(format);
      TORCH_CHECK(dense, "a fused update needs dense float parameters, gradients and state in one memory order");
      host.push_back({params_[i].data_ptr<float>(), g.data_ptr<float>(), state(0, i), state(1, i), params_[i].numel(),
                      static_cast<float>(weight_decay_[i])});
      for (int64_t b = 0; b < params_[i].numel(); b += kChunk) {
        tensor_of_chunk.push_back(static_cast<int32_t>(host.size() - 1));
        begin_of_chunk.push_back(b);
      }
    }
    const auto device = params_.front().device();
    const auto bytes = static_cast<int64_t>(host.size() * sizeof(kernels::UpdateSlice));
    slices_ = at::from_blob(host.data(), {bytes}, at::kByte).to(device);
    chunk_tensor_ =
        at::from_blob(tensor_of_chunk.data(), {static_cast<int64_t>(tensor_of_chunk.size())}, at::kInt).to(device);
    chunk_begin_ =
        at::from_blob(begin_of_chunk.data(), {static_cast<int64_t>(begin_of_chunk.size())}, at::kLong).to(device);
    num_chunks_ = static_cast<int64_t>(tensor_of_chunk.size());
  }

  std::vector<const void*> current_addresses() const {
    std::vector<const void*> out;
    for (size_t i = 0; i < params_.size(); ++i) {
      const at::Tensor& g = params_[i].grad();
      out.push_back(params_[i].data_ptr());
      out.push_back(g.defined() ? g.data_ptr() : nullptr);
      for (const auto& s : states_) out.push_back(s[i].data_ptr());
    }
    return out;
  }

  std::vector<at::Tensor> params_;
  std::vector<std::vector<at::Tensor>> states_;
  std::vector<double> weight_decay_;
  std::vector<const void*> addresses_;  // of each parameter, gradient and state when the table was built
  at::Tensor slices_, chunk_tensor_, chunk_begin_;
  int64_t num_chunks_ = 0;
};

FusedSgd::FusedSgd(std::vector<at::Tensor> params, std::vector<at::Tensor> buffers, std::vector<double> weight_decay,
                   double momentum)
    : table_(std::make_unique<UpdateTable>(std::move(params), std::vector<std::vector<at::Tensor>>{std::move(buffers)},
                                           std::move(weight_decay))),
      momentum_(momentum) {}

FusedSgd::~FusedSgd() = default;

void FusedSgd::refresh() { table_->refresh(); }

void FusedSgd::step(const at::Tensor& neg_lr, const at::Tensor* found_inf, const at::Tensor* grad_scale) {
  kernels::fused_sgd(table_->chunks(found_inf, grad_scale), static_cast<float>(momentum_), neg_lr.data_ptr<float>(),
                     at::cuda::getCurrentCUDAStream());
}

FusedAdamW::FusedAdamW(std::vector<at::Tensor> params, std::vector<at::Tensor> exp_avg,
                       std::vector<at::Tensor> exp_avg_sq, std::vector<double> weight_decay, double beta1, double beta2,
                       double eps)
    : table_(std::make_unique<UpdateTable>(
          std::move(params), std::vector<std::vector<at::Tensor>>{std::move(exp_avg), std::move(exp_avg_sq)},
          std::move(weight_decay))),
      beta1_(beta1),
      beta2_(beta2),
      eps_(eps) {}

FusedAdamW::~FusedAdamW() = default;

void FusedAdamW::refresh() { table_->refresh(); }

void FusedAdamW::step(const at::Tensor& lr, const at::Tensor& steps, const at::Tensor* found_inf,
                      const at::Tensor* grad_scale) {
  kernels::fused_adamw(table_->chunks(found_inf, grad_scale), beta1_, beta2_, static_cast<float>(eps_),
                       lr.data_ptr<float>(), steps.data_ptr<float>(), at::cuda::getCurrentCUDAStream());
}

// ---- CUDA graphs -------------------------------------------------------------------------------------

struct CudaGraph::Impl {
  std::unique_ptr<at::cuda::CUDAGraph> graph;
};

CudaGraph::CudaGraph() : impl_(std::make_unique<Impl>()) {}
CudaGraph::~CudaGraph() = default;

void CudaGraph::capture(const std::function<void()>& body) {
  const auto stream = at::cuda::getCurrentCUDAStream();
  if (stream == at::cuda::getDefaultCUDAStream()) throw std::runtime_error("capture needs a non-default stream");
  auto graph = std::make_unique<at::cuda::CUDAGraph>();
  try {
    // Thread-local capture: in the default global mode, CUDA refuses unsafe calls (allocations, syncs, event
    // queries) from every thread while this one captures, and decode: gpu's thread makes them (a batch's decode
    // failed at capture once, with 3 batches submitted ahead).
    graph->capture_begin({0, 0}, cudaStreamCaptureModeThreadLocal);
    body();
    graph->capture_end();
  } catch (const std::exception& e) {
    // Leave capture mode so that eager work can go on, and drop the half-made graph. The graph object
    // is leaked on purpose: destroying one whose capture failed is not safe in every LibTorch version.
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    cudaStreamIsCapturing(stream.stream(), &status);
    if (status != cudaStreamCaptureStatusNone) {
      cudaGraph_t partial = nullptr;
      cudaStreamEndCapture(stream.stream(), &partial);
      if (partial) cudaGraphDestroy(partial);
    }
    cudaGetLastError();
    graph.release();
    throw std::runtime_error(first_line(e.what()));
  }
  impl_->graph = std::move(graph);
}

void CudaGraph::replay() {
  if (!impl_->graph) throw std::logic_error("CudaGraph::replay before a successful capture");
  impl_->graph->replay();
}

std::string use_expandable_segments() {
  c10::CachingAllocator::setAllocatorSettings("expandable_segments:True");
  // AcceleratorAllocatorConfig: CUDAAllocatorConfig's inline getter says false outside LibTorch's own build.
  return c10::CachingAllocator::AcceleratorAllocatorConfig::use_expandable_segments()
             ? "expandable segments"
             : "fixed segments (the allocator did not take expandable_segments)";
}

void release_cached_memory() { c10::cuda::CUDACachingAllocator::emptyCache(); }

std::string describe_kernels(int device) {
  return kernels::describe_build(device) + "; LibTorch's kernels built for [" + RN50_TORCH_ARCHS + "]";
}

}  // namespace rn50::cuda
