// input/async_upload.h: AsyncUploader, pinned host batches copied to the device on a copy stream of their own.
#pragma once

#include <ATen/core/Tensor.h>

#include <functional>
#include <memory>
#include <utility>

#include "data/loader.h"

namespace rn50::input {

// Host-to-device copies of uint8 batches on a separate copy stream, `slots` batches in flight; the
// compute stream waits for a batch's copy event before using it. Host buffers come back to the loader
// once their copy has finished.
class AsyncUploader {
 public:
  AsyncUploader(int device, int batch_size, int image_size, int slots);
  ~AsyncUploader();
  // Enqueues the copy and returns the device tensors (uint8 NHWC images, int64 labels), ready on the
  // current stream. `release` is called with the batch once its copy is known to be complete.
  std::pair<at::Tensor, at::Tensor> upload(const data::HostBatch& batch,
                                           const std::function<void(const data::HostBatch&)>& release);
  // Releases every batch still in flight (waits for their copies).
  void drain();
  // Seconds the copy stream spent copying since the last call.
  double take_copy_seconds();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace rn50::input
