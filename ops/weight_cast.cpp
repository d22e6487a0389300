// ops/weight_cast.cpp: the weights' lower-precision copies as one autograd op (multi-tensor casts on a GPU, one cast
// per tensor elsewhere).
#include "ops/weight_cast.h"

#include <ATen/ATen.h>
#include <torch/autograd.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "ops/weight_cast_backend.h"

namespace rn50::ops {
namespace {

bool aligned16(const at::Tensor& t) { return reinterpret_cast<uintptr_t>(t.data_ptr()) % 16 == 0; }

// The kernels take a pair when both sides are one dense block of memory laid out alike, and 16-byte aligned: one
// misaligned tensor would send its whole launch through the element-wise path, so it is copied on its own instead
// (only views into a buffer are misaligned; the caching allocator's blocks are 512-byte aligned).
bool kernel_takes(const at::Tensor& src, const at::Tensor& dst) {
  return src.is_cuda() && src.numel() > 0 && detail::same_dense_layout(src, dst) && aligned16(src) && aligned16(dst);
}

// dst[i] = src[i] for every i where src[i] is defined: the pairs the kernels take in as few launches as there are
// lists, the others one copy each.
void convert(const std::vector<at::Tensor>& src, const std::vector<at::Tensor>& dst) {
  std::vector<at::Tensor> batched_src, batched_dst;
  for (size_t i = 0; i < src.size(); ++i) {
    if (!src[i].defined()) continue;
    if (kernel_takes(src[i], dst[i])) {
      batched_src.push_back(src[i]);
      batched_dst.push_back(dst[i]);
    } else {
      dst[i].copy_(src[i]);
    }
  }
  if (!batched_src.empty()) detail::cast_many(batched_src, batched_dst);
}

class CastWeights : public torch::autograd::Function<CastWeights> {
 public:
  static torch::autograd::variable_list forward(torch::autograd::AutogradContext* ctx, at::TensorList weights,
                                                at::ScalarType dtype) {
    std::vector<at::Tensor> src(weights.begin(), weights.end()), out;
    out.reserve(src.size());
    // empty_like keeps a dense tensor's strides (preserve_format), so that a copy is the weight's memory converted.
    for (const at::Tensor& w : src) out.push_back(at::empty_like(w, w.options().dtype(dtype)));
    convert(src, out);
    // Only the weights' geometry is needed backward, not the weights: each one's dim, sizes and strides in a row.
    std::vector<int64_t> geometry;
    for (const at::Tensor& w : src) {
      geometry.push_back(w.dim());
      geometry.insert(geometry.end(), w.sizes().begin(), w.sizes().end());
      geometry.insert(geometry.end(), w.strides().begin(), w.strides().end());
    }
    ctx->saved_data["geometry"] = geometry;
    ctx->set_materialize_grads(false);  // a copy nobody used brings no gradient, not zeros to convert
    return out;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const std::vector<int64_t> geometry = ctx->saved_data["geometry"].toIntVector();
    std::vector<at::Tensor> out(grads.size());
    size_t pos = 0;
    for (size_t i = 0; i < grads.size(); ++i) {
      const auto dim = static_cast<size_t>(geometry.at(pos));
      const c10::IntArrayRef sizes(geometry.data() + pos + 1, dim), strides(geometry.data() + pos + 1 + dim, dim);
      pos += 1 + 2 * dim;
      // Each weight's gradient in float32 with the weight's strides, as autograd's layout contract for a
      // parameter's .grad wants (so that it is kept as it is, not copied again).
      if (grads[i].defined()) out[i] = at::empty_strided(sizes, strides, grads[i].options().dtype(at::kFloat));
    }
    convert(grads, out);
    out.emplace_back();  // the dtype
    return out;
  }
};

}  // namespace

std::string cast_weights_unsupported_reason(const std::vector<at::Tensor>& weights, at::ScalarType dtype) {
  if (dtype != at::kHalf && dtype != at::kBFloat16) {
    return std::string("a cast to ") + c10::toString(dtype) + " (float16 or bfloat16 only)";
  }
  for (const at::Tensor& w : weights) {
    if (!w.defined()) return "an undefined weight";
    if (w.scalar_type() != at::kFloat) return std::string("a weight in ") + c10::toString(w.scalar_type());
    if (w.device() != weights.front().device()) return "weights on different devices";
  }
  return "";
}

std::vector<at::Tensor> cast_weights(const std::vector<at::Tensor>& weights, at::ScalarType dtype) {
  const std::string why = cast_weights_unsupported_reason(weights, dtype);
  if (!why.empty()) throw std::invalid_argument("cast_weights: " + why);
  if (weights.empty()) return {};
  return CastWeights::apply(at::TensorList(weights), dtype);
}

}  // namespace rn50::ops
