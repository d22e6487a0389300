// input/gpu_decode/crop_resample.cpp: resample plans (the same scale choice and region rounding as decode_crop_resize)
// and the CPU reference of the GPU kernel.
#include "input/gpu_decode/crop_resample.h"

#include <stdexcept>
#include <string>
#include <vector>

#include "data/transforms.h"

namespace rn50::input {

ResamplePlan plan_resample(int width, int height, const data::SampleGeometry& geometry, int out_size) {
  const codecs::CropRect& rect = geometry.rect;
  if (width <= 0 || height <= 0 || out_size <= 0 || rect.width <= 0 || rect.height <= 0 || rect.x < 0 || rect.y < 0 ||
      rect.x + rect.width > width || rect.y + rect.height > height)
    throw std::invalid_argument("plan_resample: crop " + std::to_string(rect.width) + "x" +
                                std::to_string(rect.height) + "+" + std::to_string(rect.x) + "+" +
                                std::to_string(rect.y) + " is not inside the " + std::to_string(width) + "x" +
                                std::to_string(height) + " image");
  const int num = codecs::detail::choose_scale_num(rect.width, rect.height, out_size, out_size);
  ResamplePlan plan;
  plan.width = width;
  plan.height = height;
  plan.pitch = width * 3;
  plan.box = 8 / num;
  int x0 = 0, x1 = 0, y0 = 0, y1 = 0;
  codecs::detail::scale_range(rect.x, rect.width, num, codecs::detail::scaled_size(width, num), x0, x1);
  codecs::detail::scale_range(rect.y, rect.height, num, codecs::detail::scaled_size(height, num), y0, y1);
  plan.region_x = x0;
  plan.region_y = y0;
  plan.region_width = x1 - x0;
  plan.region_height = y1 - y0;
  // decode_crop_resize's choice of cv::resize interpolation.
  const bool shrinking = plan.region_width >= out_size && plan.region_height >= out_size;
  const bool shrinking_2x = plan.region_width >= 2 * out_size || plan.region_height >= 2 * out_size;
  plan.area = shrinking && shrinking_2x ? 1 : 0;
  plan.flip = geometry.flip ? 1 : 0;
  plan.scale_x = static_cast<float>(static_cast<double>(plan.region_width) / out_size);
  plan.scale_y = static_cast<float>(static_cast<double>(plan.region_height) / out_size);
  return plan;
}

ResamplePlan plan_identity(int out_size) {
  ResamplePlan plan;
  plan.width = plan.height = out_size;
  plan.pitch = out_size * 3;
  plan.region_width = plan.region_height = out_size;
  return plan;
}

void use_packed_planes(ResamplePlan& plan, int step_x, int step_y, int chroma_width, int chroma_height) {
  const int64_t luma = static_cast<int64_t>(plan.width) * plan.height;
  plan.planar = 1;
  plan.pitch = plan.width;
  plan.chroma_step_x = step_x;
  plan.chroma_step_y = step_y;
  plan.chroma_width = plan.chroma_pitch = chroma_width;
  plan.chroma_height = chroma_height;
  plan.cb_offset = luma;
  plan.cr_offset = luma + static_cast<int64_t>(chroma_width) * chroma_height;
}

Normalization imagenet_normalization() {
  Normalization n{};
  for (int c = 0; c < 3; ++c) {
    n.scale[c] = 1.0f / (255.0f * data::kImageNetStd[c]);
    n.shift[c] = data::kImageNetMean[c] / data::kImageNetStd[c];
  }
  return n;
}

void resample_reference(const uint8_t* image, const ResamplePlan& plan, int out_size, uint8_t* out_hwc) {
  for (int y = 0; y < out_size; ++y) {
    for (int x = 0; x < out_size; ++x) {
      float rgb[3];
      resample::output_pixel(image, plan, x, y, out_size, rgb);
      uint8_t* px = out_hwc + (static_cast<size_t>(y) * out_size + x) * 3;
      for (int c = 0; c < 3; ++c) px[c] = static_cast<uint8_t>(rgb[c]);
    }
  }
}

void crop_resize_normalize_reference(const uint8_t* image, const ResamplePlan& plan, int out_size, float* out_chw) {
  std::vector<uint8_t> levels(static_cast<size_t>(out_size) * out_size * 3);
  resample_reference(image, plan, out_size, levels.data());
  const Normalization norm = imagenet_normalization();
  const size_t plane = static_cast<size_t>(out_size) * out_size;
  for (size_t p = 0; p < plane; ++p)
    for (int c = 0; c < 3; ++c) out_chw[c * plane + p] = levels[p * 3 + c] * norm.scale[c] - norm.shift[c];
}

}  // namespace rn50::input
