// ops/max_pool_cuda.cpp: the max-pool kernels' glue (CUDA builds only): tensors to plans and pointers, outputs from
// the caching allocator and launches on the current stream, so that a CUDA graph can capture them.
#include <ATen/ATen.h>
#include <c10/core/DeviceGuard.h>

#include <cstdint>
#include <stdexcept>
#include <string>

#include "ops/current_stream.h"
#include "ops/max_pool_backend.h"
#include "ops/max_pool_kernels.h"

namespace rn50::ops::detail {
namespace {

constexpr auto kChannelsLast = at::MemoryFormat::ChannelsLast;

bool aligned16(std::initializer_list<const at::Tensor*> tensors) {
  for (const at::Tensor* t : tensors) {
    if (reinterpret_cast<uintptr_t>(t->data_ptr()) % 16 != 0) return false;
  }
  return true;
}

template <typename T>
void forward_as(const at::Tensor& x, const kernels::PoolShape& shape, const MaxPoolForward& out, cudaStream_t stream) {
  const kernels::PoolPlan plan = kernels::make_pool_plan(shape, sizeof(T), aligned16({&x, &out.y, &out.positions}));
  kernels::max_pool_forward<T>(plan, static_cast<const T*>(x.data_ptr()), static_cast<T*>(out.y.data_ptr()),
                               static_cast<uint8_t*>(out.positions.data_ptr()), stream);
}

template <typename T>
void norm_forward_as(const at::Tensor& x, const kernels::PoolShape& shape, const kernels::PoolNorm& norm,
                     const MaxPoolForward& out, cudaStream_t stream) {
  const kernels::PoolPlan plan =
      kernels::make_pool_plan(shape, sizeof(T), aligned16({&x, &out.y, &out.positions, &out.x_at}));
  kernels::bn_relu_max_pool_forward<T>(
      plan, static_cast<const T*>(x.data_ptr()), norm, static_cast<T*>(out.y.data_ptr()),
      static_cast<uint8_t*>(out.positions.data_ptr()), static_cast<T*>(out.x_at.data_ptr()), stream);
}

template <typename T>
void backward_as(const at::Tensor& dy, const at::Tensor& positions, const kernels::PoolShape& shape,
                 const at::Tensor& dx, cudaStream_t stream) {
  const kernels::PoolPlan plan = kernels::make_pool_plan(shape, sizeof(T), aligned16({&dy, &positions, &dx}));
  kernels::max_pool_backward<T>(plan, static_cast<const T*>(dy.data_ptr()),
                                static_cast<const uint8_t*>(positions.data_ptr()), static_cast<T*>(dx.data_ptr()),
                                stream);
}

[[noreturn]] void refuse_dtype(at::ScalarType t) {
  throw std::invalid_argument("rn50's max_pool2d: dtype " + std::string(c10::toString(t)));
}

// Calls f with a value of the element type of `t` (float, half or bfloat16); refuses any other dtype.
template <typename F>
void with_element_type(at::ScalarType t, F&& f) {
  switch (t) {
    case at::kFloat:
      return f(float{});
    case at::kHalf:
      return f(__half{});
    case at::kBFloat16:
      return f(__nv_bfloat16{});
    default:
      refuse_dtype(t);
  }
}

MaxPoolForward empty_outputs(const at::Tensor& x, const kernels::PoolShape& shape) {
  const auto oh = kernels::pool_output_size(shape.h, shape.kh, shape.sh, shape.ph);
  const auto ow = kernels::pool_output_size(shape.w, shape.kw, shape.sw, shape.pw);
  MaxPoolForward out;
  out.y = at::empty({shape.n, shape.c, oh, ow}, x.options().memory_format(kChannelsLast));
  out.positions = at::empty({shape.n, shape.c, oh, ow}, x.options().dtype(at::kByte).memory_format(kChannelsLast));
  return out;
}

}  // namespace

MaxPoolForward max_pool_forward(const at::Tensor& x, const kernels::PoolShape& shape) {
  const c10::DeviceGuard guard(x.device());
  const cudaStream_t stream = current_stream(static_cast<int>(x.get_device()));
  MaxPoolForward out = empty_outputs(x, shape);
  with_element_type(x.scalar_type(), [&](auto t) { forward_as<decltype(t)>(x, shape, out, stream); });
  return out;
}

MaxPoolForward bn_relu_max_pool_forward(const at::Tensor& x, const kernels::PoolShape& shape, const at::Tensor& weight,
                                        const at::Tensor& bias, const at::Tensor& mean, const at::Tensor& invstd) {
  const c10::DeviceGuard guard(x.device());
  const cudaStream_t stream = current_stream(static_cast<int>(x.get_device()));
  for (const at::Tensor* t : {&weight, &bias, &mean, &invstd}) {
    if (t->scalar_type() != at::kFloat || t->device() != x.device() || !t->is_contiguous() || t->numel() != shape.c) {
      throw std::invalid_argument("rn50's bn_relu_max_pool2d: BatchNorm tensors must be float32 [C] on x's device");
    }
  }
  const kernels::PoolNorm norm{weight.data_ptr<float>(), bias.data_ptr<float>(), mean.data_ptr<float>(),
                               invstd.data_ptr<float>()};
  MaxPoolForward out = empty_outputs(x, shape);
  out.x_at = at::empty_like(out.y);
  with_element_type(x.scalar_type(), [&](auto t) { norm_forward_as<decltype(t)>(x, shape, norm, out, stream); });
  return out;
}

at::Tensor max_pool_backward(const at::Tensor& dy_any, const at::Tensor& positions, const kernels::PoolShape& shape) {
  const c10::DeviceGuard guard(dy_any.device());
  const cudaStream_t stream = current_stream(static_cast<int>(dy_any.get_device()));
  // The next op's gradient can come in any layout (an NCHW copy, a broadcast); the kernel reads dense channels-last.
  const at::Tensor dy = dy_any.contiguous(kChannelsLast);
  const at::Tensor dx = at::empty({shape.n, shape.c, shape.h, shape.w}, dy.options().memory_format(kChannelsLast));
  with_element_type(dy.scalar_type(), [&](auto t) { backward_as<decltype(t)>(dy, positions, shape, dx, stream); });
  return dx;
}

}  // namespace rn50::ops::detail
