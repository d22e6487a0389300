// core/torch_compat.h: the few calls that differ between LibTorch 1.13 (Debian) and 2.x (pip); include from .cpp only.
#pragma once

#include <ATen/ATen.h>
#include <ATen/autocast_mode.h>
#include <torch/version.h>

#include <optional>

namespace rn50::compat {

// Turns CUDA autocast on or off for the calling thread, at the given lower precision.
inline void set_cuda_autocast(bool enabled, at::ScalarType dtype) {
#if TORCH_VERSION_MAJOR >= 2
  at::autocast::set_autocast_enabled(at::kCUDA, enabled);
  at::autocast::set_autocast_dtype(at::kCUDA, dtype);
#else
  at::autocast::set_enabled(enabled);
  at::autocast::set_autocast_gpu_dtype(dtype);
#endif
}

// The dtype CUDA autocast computes matrix products in on the calling thread, none where it is off.
inline std::optional<at::ScalarType> cuda_autocast_dtype() {
#if TORCH_VERSION_MAJOR >= 2
  if (!at::autocast::is_autocast_enabled(at::kCUDA)) return std::nullopt;
  return at::autocast::get_autocast_dtype(at::kCUDA);
#else
  if (!at::autocast::is_enabled()) return std::nullopt;
  return at::autocast::get_autocast_gpu_dtype();
#endif
}

// C++ never clears autocast's cache of low-precision weight copies by itself (Python does when the
// context exits); stale copies would survive the optimizer update.
inline void clear_autocast_cache() { at::autocast::clear_cache(); }

// softmax(q k^T / sqrt(head_dim)) v over [batch, heads, tokens, head_dim], no mask, no dropout: 2.x's public op,
// 1.13's private one (the same math on the CPU; its second output, the weights, is not asked for).
inline at::Tensor scaled_dot_product_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) {
#if TORCH_VERSION_MAJOR >= 2
  return at::scaled_dot_product_attention(q, k, v);
#else
  return std::get<0>(at::_scaled_dot_product_attention(q, k, v, c10::nullopt, 0.0, /*need_attn_weights=*/false));
#endif
}

}  // namespace rn50::compat
