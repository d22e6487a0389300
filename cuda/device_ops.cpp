// cuda/device_ops.cpp: side stream, normalisation, fused SGD and CUDA graphs (CUDA build).
#include "cuda/device_ops.h"

#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/CUDAGraph.h>
#include <c10/core/AllocatorConfig.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAStream.h>

#include <stdexcept>

#include "core/errors.h"
#include "cuda/cuda_check.h"
#include "cuda/kernels.h"

namespace rn50::cuda {

void use_side_stream(int device) {
  c10::cuda::set_device(static_cast<c10::DeviceIndex>(device));
  c10::cuda::setCurrentCUDAStream(
      c10::cuda::getStreamFromPool(/*isHighPriority=*/false, static_cast<c10::DeviceIndex>(device)));
}

void normalize_into(const at::Tensor& images, at::Tensor& out, const float scale[3], const float shift[3]) {
  TORCH_CHECK(images.is_cuda() && images.scalar_type() == at::kByte && images.dim() == 4 && images.size(3) == 3 &&
                  images.is_contiguous(),
              "normalize_into: expected contiguous uint8 NHWC images on the GPU");
  TORCH_CHECK(out.is_cuda() && out.dim() == 4 && out.size(0) == images.size(0) && out.size(1) == 3 &&
                  out.size(2) == images.size(1) && out.size(3) == images.size(2),
              "normalize_into: output must be [N, 3, H, W] matching the images");
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
                            images.size(2), channels_last, scale, shift, at::cuda::getCurrentCUDAStream());
}

// ---- fused SGD -------------------------------------------------------------------------------------

struct FusedSgd::Table {
  std::vector<at::Tensor> params, buffers;
  std::vector<double> weight_decay;
  double momentum = 0;
  std::vector<const void*> addresses;  // (param, grad, momentum) of each parameter when the table was built
  at::Tensor slices, chunk_tensor, chunk_begin;
  int64_t num_chunks = 0;
  static constexpr int64_t kChunk = 16384;

  void build() {
    std::vector<kernels::SgdSlice> host;
    std::vector<int32_t> tensor_of_chunk;
    std::vector<int64_t> begin_of_chunk;
    addresses = current_addresses();
    for (size_t i = 0; i < params.size(); ++i) {
      const at::Tensor& g = params[i].grad();
      if (!g.defined()) continue;  // a parameter without a gradient is left alone, as the ATen path does
      // The update is elementwise: any dense layout works, as long as all three share its memory order.
      // (Strides alone can differ where a dimension has size 1, as in a 1x1 convolution's weight.)
      const auto format = params[i].suggest_memory_format();
      TORCH_CHECK(g.defined() && g.scalar_type() == at::kFloat && params[i].is_contiguous(format) &&
                      g.is_contiguous(format) && buffers[i].is_contiguous(format),
                  "fused SGD needs dense float parameters, gradients and momentum in one memory order");
      host.push_back({params[i].data_ptr<float>(), g.data_ptr<float>(), buffers[i].data_ptr<float>(), params[i].numel(),
                      static_cast<float>(weight_decay[i])});
      for (int64_t b = 0; b < params[i].numel(); b += kChunk) {
        tensor_of_chunk.push_back(static_cast<int32_t>(i));
        begin_of_chunk.push_back(b);
      }
    }
    const auto device = params.front().device();
    const auto bytes = static_cast<int64_t>(host.size() * sizeof(kernels::SgdSlice));
    slices = at::from_blob(host.data(), {bytes}, at::kByte).to(device);
    chunk_tensor =
        at::from_blob(tensor_of_chunk.data(), {static_cast<int64_t>(tensor_of_chunk.size())}, at::kInt).to(device);
    chunk_begin =
        at::from_blob(begin_of_chunk.data(), {static_cast<int64_t>(begin_of_chunk.size())}, at::kLong).to(device);
    num_chunks = static_cast<int64_t>(tensor_of_chunk.size());
  }

  std::vector<const void*> current_addresses() const {
    std::vector<const void*> out;
    for (size_t i = 0; i < params.size(); ++i) {
      const at::Tensor& g = params[i].grad();
      out.push_back(params[i].data_ptr());
      out.push_back(g.defined() ? g.data_ptr() : nullptr);
      out.push_back(buffers[i].data_ptr());
    }
    return out;
  }

  // Host-side pointer comparisons only: a parameter moved (set_data, to()) or a gradient (re)created.
  bool stale() const { return current_addresses() != addresses; }
};

FusedSgd::FusedSgd(std::vector<at::Tensor> params, std::vector<at::Tensor> buffers, std::vector<double> weight_decay,
                   double momentum)
    : table_(std::make_unique<Table>()) {
  table_->params = std::move(params);
  table_->buffers = std::move(buffers);
  table_->weight_decay = std::move(weight_decay);
  table_->momentum = momentum;
}

FusedSgd::~FusedSgd() = default;

void FusedSgd::step(const at::Tensor& neg_lr, const at::Tensor* found_inf) {
  if (table_->stale()) table_->build();  // host-side pointer comparison only; no device sync
  kernels::fused_sgd(reinterpret_cast<const kernels::SgdSlice*>(table_->slices.data_ptr()),
                     table_->chunk_tensor.data_ptr<int32_t>(), table_->chunk_begin.data_ptr<int64_t>(),
                     table_->num_chunks, Table::kChunk, static_cast<float>(table_->momentum), neg_lr.data_ptr<float>(),
                     found_inf ? found_inf->data_ptr<float>() : nullptr, at::cuda::getCurrentCUDAStream());
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
