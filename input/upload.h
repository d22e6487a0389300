// input/upload.h: host batches (uint8, NHWC) to normalised device tensors; synthetic batches made on the device.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <utility>
#include <vector>

#include "data/loader.h"

namespace rn50::input {

// uint8 images cross the bus; the conversion to float, the ImageNet normalisation and the layout
// change happen on the device.
class InputUploader {
 public:
  InputUploader(c10::Device device, bool channels_last);
  // Blocking copy: returns (images uint8 NHWC, labels int64) on the device. The host buffer may be
  // reused as soon as this returns.
  std::pair<at::Tensor, at::Tensor> upload(const data::HostBatch& batch, int image_size);
  // Normalises uint8 NHWC images that are already on the device into `out` ([N,3,H,W], its own dtype
  // and layout): one kernel on CUDA, ATen ops elsewhere.
  void normalize_into(const at::Tensor& images_nhwc_u8, at::Tensor& out) const;

 private:
  c10::Device device_;
  bool channels_last_;
  float scale_host_[3], shift_host_[3];
  at::Tensor scale_;  // 1 / (255 * std), per channel
  at::Tensor shift_;  // mean / std, per channel
};

// A few fixed random batches on the device, cycled: data loading costs nothing, so the step rate is compute alone.
class SyntheticBatches {
 public:
  SyntheticBatches(c10::Device device, int batch_size, int image_size, int64_t num_classes, at::ScalarType dtype,
                   bool channels_last, int64_t seed);
  std::pair<at::Tensor, at::Tensor> next();

 private:
  std::vector<std::pair<at::Tensor, at::Tensor>> batches_;
  size_t cursor_ = 0;
};

}  // namespace rn50::input
