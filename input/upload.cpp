// input/upload.cpp: device upload and normalisation of image batches.
#include "input/upload.h"

#include <ATen/ATen.h>

#include <algorithm>

#include "cuda/device_ops.h"
#include "input/gpu_decode/crop_resample.h"

namespace rn50::input {

InputUploader::InputUploader(c10::Device device) : device_(device) {
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
  // permute gives the NCHW view, and copy_ writes it in out's layout. Channels past the image's 3 are zeros.
  out.narrow(1, 0, 3).copy_(images_nhwc_u8.to(at::kFloat).mul_(scale_).sub_(shift_).permute({0, 3, 1, 2}));
  if (out.size(1) > 3) out.narrow(1, 3, out.size(1) - 3).zero_();
}

std::pair<at::Tensor, at::Tensor> InputUploader::upload(const data::HostBatch& batch, int image_size) {
  const at::Tensor images = at::from_blob(batch.images, {batch.size, image_size, image_size, 3}, at::kByte);
  const at::Tensor labels = at::from_blob(batch.labels, {batch.size}, at::kLong);
  // copy=true: on the CPU device .to() would alias the pool's buffer, which a worker refills after release.
  return {images.to(device_, /*non_blocking=*/false, /*copy=*/true),
          labels.to(device_, /*non_blocking=*/false, /*copy=*/true)};
}

}  // namespace rn50::input
