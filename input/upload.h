// input/upload.h: InputUploader, host batches (uint8, NHWC) to normalised device tensors.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <utility>

#include "data/loader.h"

namespace rn50::input {

// uint8 images cross the bus; the conversion to float, the ImageNet normalisation and the layout
// change happen on the device.
class InputUploader {
 public:
  explicit InputUploader(c10::Device device);
  // Blocking copy: returns (images uint8 NHWC, labels int64) on the device. The host buffer may be
  // reused as soon as this returns.
  std::pair<at::Tensor, at::Tensor> upload(const data::HostBatch& batch, int image_size);
  // Normalises uint8 NHWC images that are already on the device into `out` ([N,C,H,W], its own dtype
  // and layout; C is 3, or more with zeros past the third): one kernel on CUDA, ATen ops elsewhere.
  void normalize_into(const at::Tensor& images_nhwc_u8, at::Tensor& out) const;

 private:
  c10::Device device_;
  float scale_host_[3], shift_host_[3];
  at::Tensor scale_;  // 1 / (255 * std), per channel
  at::Tensor shift_;  // mean / std, per channel
};

}  // namespace rn50::input
