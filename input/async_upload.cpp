// input/async_upload.cpp: AsyncUploader, host-to-device copies of uint8 batches on a copy stream (CUDA builds).
#include "input/async_upload.h"

#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAStream.h>

#include <optional>
#include <vector>

#include "cuda/cuda_check.h"
#include "cuda/cuda_event.h"

namespace rn50::input {

struct AsyncUploader::Impl {
  struct Slot {
    at::Tensor images, labels;                 // device buffers, allocated once
    cuda::Event free;                          // compute stream is done reading this slot
    cuda::Event copy_start, copied;            // on the copy stream
    std::optional<data::HostBatch> in_flight;  // host batch whose copy is (or was) running
    bool free_recorded = false;
  };
  c10::cuda::CUDAStream copy_stream;
  std::vector<std::unique_ptr<Slot>> slots;
  int next = 0;
  int last = -1;
  double copy_seconds = 0;
  std::function<void(const data::HostBatch&)> release;

  explicit Impl(int device) : copy_stream(c10::cuda::getStreamFromPool(false, static_cast<c10::DeviceIndex>(device))) {}

  void retire(Slot& slot, bool wait) {
    if (!slot.in_flight) return;
    if (wait) {
      RN50_CUDA_CHECK(cudaEventSynchronize(slot.copied.event));
    } else if (cudaEventQuery(slot.copied.event) != cudaSuccess) {
      cudaGetLastError();  // cudaErrorNotReady is not an error here
      return;
    }
    copy_seconds += cuda::elapsed_seconds(slot.copy_start.event, slot.copied.event);
    release(*slot.in_flight);
    slot.in_flight.reset();
  }
};

AsyncUploader::AsyncUploader(int device, int batch_size, int image_size, int slots)
    : impl_(std::make_unique<Impl>(device)) {
  const auto options = at::TensorOptions(at::Device(at::kCUDA, static_cast<c10::DeviceIndex>(device)));
  for (int i = 0; i < slots; ++i) {
    auto slot = std::make_unique<Impl::Slot>();
    slot->images = at::empty({batch_size, image_size, image_size, 3}, options.dtype(at::kByte));
    slot->labels = at::empty({batch_size}, options.dtype(at::kLong));
    impl_->slots.push_back(std::move(slot));
  }
}

AsyncUploader::~AsyncUploader() {
  // Copies still running would write into buffers that are about to be freed.
  impl_->copy_stream.synchronize();
}

std::pair<at::Tensor, at::Tensor> AsyncUploader::upload(const data::HostBatch& batch,
                                                        const std::function<void(const data::HostBatch&)>& release) {
  auto& s = *impl_;
  s.release = release;
  const cudaStream_t compute = at::cuda::getCurrentCUDAStream().stream();
  // The previous slot's readers were enqueued on the compute stream after the last upload returned.
  if (s.last >= 0) {
    RN50_CUDA_CHECK(cudaEventRecord(s.slots[s.last]->free.event, compute));
    s.slots[s.last]->free_recorded = true;
  }
  for (auto& slot : s.slots) s.retire(*slot, /*wait=*/false);
  auto& slot = *s.slots[s.next];
  s.retire(slot, /*wait=*/true);
  const cudaStream_t copy = s.copy_stream.stream();
  if (slot.free_recorded) RN50_CUDA_CHECK(cudaStreamWaitEvent(copy, slot.free.event, 0));
  const auto n = batch.size;
  const size_t image_bytes = static_cast<size_t>(slot.images[0].numel()) * static_cast<size_t>(n);
  RN50_CUDA_CHECK(cudaEventRecord(slot.copy_start.event, copy));
  RN50_CUDA_CHECK(cudaMemcpyAsync(slot.images.data_ptr(), batch.images, image_bytes, cudaMemcpyHostToDevice, copy));
  RN50_CUDA_CHECK(cudaMemcpyAsync(slot.labels.data_ptr(), batch.labels, sizeof(int64_t) * static_cast<size_t>(n),
                                  cudaMemcpyHostToDevice, copy));
  RN50_CUDA_CHECK(cudaEventRecord(slot.copied.event, copy));
  RN50_CUDA_CHECK(cudaStreamWaitEvent(compute, slot.copied.event, 0));
  slot.in_flight = batch;
  s.last = s.next;
  s.next = (s.next + 1) % static_cast<int>(s.slots.size());
  return {slot.images.narrow(0, 0, n), slot.labels.narrow(0, 0, n)};
}

void AsyncUploader::drain() {
  for (auto& slot : impl_->slots) impl_->retire(*slot, /*wait=*/true);
}

double AsyncUploader::take_copy_seconds() {
  const double s = impl_->copy_seconds;
  impl_->copy_seconds = 0;
  return s;
}

}  // namespace rn50::input
