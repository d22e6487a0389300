// input/upload.cpp: device upload and normalisation of image batches; synthetic batches.
#include "input/upload.h"

#include <ATen/ATen.h>

#include <algorithm>

#include "input/gpu_decode/crop_resample.h"
#include "cuda/device_ops.h"

namespace rn50::input {

InputUploader::InputUploader(c10::Device device, bool channels_last) : device_(device), channels_last_(channels_last) {
  const input::Normalization norm = input::imagenet_normalization();  // the GPU decode path's constants too
  std::copy(norm.scale, norm.scale + 3, scale_host_);
  std::copy(norm.shift, norm.shift + 3, shift_host_);
  scale_ = at::tensor(std::vector<float>(scale_host_, scale_host_ + 3)).to(device);
  shift_ = at::tensor(std::vector<float>(shift_host_, shift_host_ + 3)).to(device);
}

void InputUploader::normalize_into(const at::Tensor& images_nhwc_u8, at::Tensor& out) const {
  if (device_.is_cuda()) {
    cuda::normalize_into(images_nhwc_u8, out, scale_host_, shift_host_);
    return;
  }
  // (x / 255 - mean) / std, computed in NHWC where the channel is the last, broadcast dimension; the
  // permute gives the NCHW view, and copy_ writes it in out's layout.
  out.copy_(images_nhwc_u8.to(at::kFloat).mul_(scale_).sub_(shift_).permute({0, 3, 1, 2}));
}

std::pair<at::Tensor, at::Tensor> InputUploader::upload(const data::HostBatch& batch, int image_size) {
  const at::Tensor images = at::from_blob(batch.images, {batch.size, image_size, image_size, 3}, at::kByte);
  const at::Tensor labels = at::from_blob(batch.labels, {batch.size}, at::kLong);
  // copy=true: on the CPU device .to() would alias the pool's buffer, which a worker refills after release.
  return {images.to(device_, /*non_blocking=*/false, /*copy=*/true),
          labels.to(device_, /*non_blocking=*/false, /*copy=*/true)};
}

SyntheticBatches::SyntheticBatches(c10::Device device, int batch_size, int image_size, int64_t num_classes,
                                   at::ScalarType dtype, bool channels_last, int64_t seed) {
  at::Generator gen = at::detail::createCPUGenerator(static_cast<uint64_t>(seed));
  for (int i = 0; i < 4; ++i) {
    at::Tensor images = at::randn({batch_size, 3, image_size, image_size}, gen, at::TensorOptions(at::kFloat));
    at::Tensor labels = at::randint(num_classes, {batch_size}, gen, at::TensorOptions(at::kLong));
    images = images.to(device, dtype);
    if (channels_last) images = images.contiguous(at::MemoryFormat::ChannelsLast);
    batches_.emplace_back(images, labels.to(device));
  }
}

std::pair<at::Tensor, at::Tensor> SyntheticBatches::next() {
  const auto& batch = batches_[cursor_];
  cursor_ = (cursor_ + 1) % batches_.size();
  return batch;
}

}  // namespace rn50::input
