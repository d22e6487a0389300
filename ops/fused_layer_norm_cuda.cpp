// ops/fused_layer_norm_cuda.cpp: the row kernels' CUDA side (CUDA builds only): dtype dispatch, outputs and workspaces
// from the caching allocator and launches on the current stream, so that a CUDA graph can capture them.
#include <ATen/ATen.h>
#include <c10/core/DeviceGuard.h>

#include <cstdint>
#include <stdexcept>
#include <string>

#include "ops/current_stream.h"
#include "ops/fused_layer_norm_backend.h"
#include "ops/layer_norm_kernels.h"
#include "ops/layer_norm_kernels_impl.cuh"

namespace rn50::ops::detail::layer_norm {
namespace {

namespace rows = kernels::rows;

template <typename T>
struct Tag {
  using type = T;
};

// Calls f(Tag<X>, Tag<B>, Tag<Y>) for a dtype triple the kernels are built for (a missing branch takes x's dtype, or
// float32's beside a float32 x); returns false for any other.
template <typename F>
bool dispatch(at::ScalarType x, std::optional<at::ScalarType> branch, at::ScalarType y, F&& f) {
  using at::kBFloat16;
  using at::kFloat;
  using at::kHalf;
  const at::ScalarType b = branch.value_or(x);
  if (x == kFloat && b == kFloat && y == kFloat) return f(Tag<float>{}, Tag<float>{}, Tag<float>{}), true;
  if (x == kFloat && b == kFloat && y == kHalf) return f(Tag<float>{}, Tag<float>{}, Tag<__half>{}), true;
  if (x == kFloat && b == kFloat && y == kBFloat16) return f(Tag<float>{}, Tag<float>{}, Tag<__nv_bfloat16>{}), true;
  if (x == kFloat && b == kHalf && y == kHalf) return f(Tag<float>{}, Tag<__half>{}, Tag<__half>{}), true;
  if (x == kFloat && b == kBFloat16 && y == kBFloat16) {
    return f(Tag<float>{}, Tag<__nv_bfloat16>{}, Tag<__nv_bfloat16>{}), true;
  }
  if (x == kHalf && b == kHalf && y == kHalf) return f(Tag<__half>{}, Tag<__half>{}, Tag<__half>{}), true;
  if (x == kHalf && b == kHalf && y == kFloat) return f(Tag<__half>{}, Tag<__half>{}, Tag<float>{}), true;
  if (x == kBFloat16 && b == kBFloat16 && y == kBFloat16) {
    return f(Tag<__nv_bfloat16>{}, Tag<__nv_bfloat16>{}, Tag<__nv_bfloat16>{}), true;
  }
  if (x == kBFloat16 && b == kBFloat16 && y == kFloat) {
    return f(Tag<__nv_bfloat16>{}, Tag<__nv_bfloat16>{}, Tag<float>{}), true;
  }
  return false;
}

template <typename T>
T* ptr(const at::Tensor& t) {
  return t.defined() ? static_cast<T*>(t.data_ptr()) : nullptr;
}

// The widest vector every tensor allows: 8 elements where all are 16-byte aligned (the caching allocator's blocks are).
int max_vec(std::initializer_list<const at::Tensor*> tensors) {
  for (const at::Tensor* t : tensors) {
    if (t->defined() && reinterpret_cast<uintptr_t>(t->data_ptr()) % 16 != 0) return 1;
  }
  return rows::kMaxVec;
}

int64_t width_of(const at::Tensor& t) { return t.size(-1); }
int64_t rows_of(const at::Tensor& t) { return t.numel() / t.size(-1); }
int device_index(const at::Tensor& t) { return static_cast<int>(t.get_device()); }

kernels::RowPlan plan_for(const at::Tensor& like, int64_t n_rows, int64_t width, int vec) {
  const kernels::RowPlan p = kernels::make_row_plan(n_rows, width, vec, device_index(like));
  if (!p.supported) throw std::invalid_argument("fused layer_norm: width " + std::to_string(width) + " unsupported");
  return p;
}

at::Tensor workspace(const kernels::RowPlan& p, const at::Tensor& like) {
  return at::empty({static_cast<int64_t>(p.workspace_bytes / sizeof(float))}, like.options().dtype(at::kFloat));
}

std::string dtype_names(at::ScalarType x, std::optional<at::ScalarType> branch, at::ScalarType y) {
  std::string s = c10::toString(x);
  if (branch) s += std::string(" + ") + c10::toString(*branch);
  return s + " -> " + c10::toString(y);
}

}  // namespace

bool built_with_cuda() { return true; }

std::string kernel_unsupported_reason(at::ScalarType x, std::optional<at::ScalarType> branch, at::ScalarType y,
                                      int64_t width) {
  if (!dispatch(x, branch, y, [](auto, auto, auto) {})) return "dtypes " + dtype_names(x, branch, y);
  if (!rows::make_row_plan_for(1, width, rows::kMaxVec, 1).supported) {
    return "width " + std::to_string(width) + " (the kernels take 32 * vec * items, vec 1-8, items 1-4: up to " +
           std::to_string(rows::kMaxWidth) + ")";
  }
  return "";
}

Forward forward(const at::Tensor& x, const at::Tensor& branch, const at::Tensor& weight, const at::Tensor& bias,
                double eps, at::ScalarType out_dtype) {
  const c10::DeviceGuard guard(x.device());
  Forward out;
  out.y = at::empty(x.sizes(), x.options().dtype(out_dtype));
  if (branch.defined()) out.sum = at::empty_like(x, at::MemoryFormat::Contiguous);
  const int64_t n_rows = rows_of(x);
  out.mean = at::empty({n_rows}, x.options().dtype(at::kFloat));
  out.rstd = at::empty({n_rows}, x.options().dtype(at::kFloat));
  const kernels::RowPlan p = plan_for(x, n_rows, width_of(x), max_vec({&x, &branch, &out.sum, &out.y}));
  const cudaStream_t stream = current_stream(device_index(x));
  const std::optional<at::ScalarType> b =
      branch.defined() ? std::optional<at::ScalarType>(branch.scalar_type()) : std::nullopt;
  const bool ran = dispatch(x.scalar_type(), b, out_dtype, [&](auto xt, auto bt, auto yt) {
    using X = typename decltype(xt)::type;
    using B = typename decltype(bt)::type;
    using Y = typename decltype(yt)::type;
    kernels::LayerNormForwardArgs<X, B, Y> a;
    a.x = ptr<const X>(x);
    a.branch = ptr<const B>(branch);
    a.sum = ptr<X>(out.sum);
    a.y = ptr<Y>(out.y);
    a.weight = ptr<const float>(weight);
    a.bias = ptr<const float>(bias);
    a.mean = ptr<float>(out.mean);
    a.rstd = ptr<float>(out.rstd);
    a.eps = static_cast<float>(eps);
    kernels::layer_norm_forward<X, B, Y>(p, a, stream);
  });
  if (!ran) throw std::invalid_argument("fused layer_norm: dtypes " + dtype_names(x.scalar_type(), b, out_dtype));
  return out;
}

Backward backward(const at::Tensor& dy_in, const at::Tensor& dsum_in, const at::Tensor& s, const at::Tensor& weight,
                  const at::Tensor& mean, const at::Tensor& rstd, std::optional<at::ScalarType> branch_dtype) {
  const c10::DeviceGuard guard(s.device());
  // Autograd may hand over gradients in another layout (an expanded zero, a transposed view): the kernels read rows.
  const at::Tensor dy = dy_in.contiguous();
  const at::Tensor dsum = dsum_in.defined() ? dsum_in.contiguous() : dsum_in;
  Backward out;
  out.dx = at::empty_like(s, at::MemoryFormat::Contiguous);
  if (branch_dtype) out.dbranch = at::empty(s.sizes(), s.options().dtype(*branch_dtype));
  const int64_t width = width_of(s);
  out.dweight = at::empty({width}, s.options().dtype(at::kFloat));
  out.dbias = at::empty({width}, s.options().dtype(at::kFloat));
  const kernels::RowPlan p = plan_for(s, rows_of(s), width, max_vec({&dy, &dsum, &s, &out.dx, &out.dbranch}));
  const at::Tensor ws = workspace(p, s);
  const cudaStream_t stream = current_stream(device_index(s));
  const bool ran = dispatch(s.scalar_type(), branch_dtype, dy.scalar_type(), [&](auto xt, auto bt, auto yt) {
    using X = typename decltype(xt)::type;
    using B = typename decltype(bt)::type;
    using Y = typename decltype(yt)::type;
    kernels::LayerNormBackwardArgs<X, B, Y> a;
    a.dy = ptr<const Y>(dy);
    a.s = ptr<const X>(s);
    a.dsum = ptr<const X>(dsum);
    a.weight = ptr<const float>(weight);
    a.mean = ptr<const float>(mean);
    a.rstd = ptr<const float>(rstd);
    a.dx = ptr<X>(out.dx);
    a.dbranch = ptr<B>(out.dbranch);
    a.dweight = ptr<float>(out.dweight);
    a.dbias = ptr<float>(out.dbias);
    a.workspace = ws.data_ptr();
    kernels::layer_norm_backward<X, B, Y>(p, a, stream);
  });
  if (!ran) {
    throw std::invalid_argument("fused layer_norm backward: dtypes " +
                                dtype_names(s.scalar_type(), branch_dtype, dy.scalar_type()));
  }
  return out;
}

namespace {

// Calls f(Tag<Y>) for the branch dtypes the scaled residual is built for (x float32).
template <typename F>
void dispatch_y(at::ScalarType y, F&& f) {
  switch (y) {
    case at::kFloat:
      return f(Tag<float>{});
    case at::kHalf:
      return f(Tag<__half>{});
    case at::kBFloat16:
      return f(Tag<__nv_bfloat16>{});
    default:
      throw std::invalid_argument(std::string("fused scaled_residual: branch dtype ") + c10::toString(y));
  }
}

}  // namespace

at::Tensor scaled_residual_forward(const at::Tensor& x, const at::Tensor& y, const at::Tensor& gamma,
                                   const at::Tensor& scale, int64_t rows_per_sample) {
  const c10::DeviceGuard guard(x.device());
  at::Tensor out = at::empty_like(x);  // x's layout (channels-last): the same rows
  const kernels::RowPlan p = plan_for(x, rows_of(y), width_of(y), max_vec({&x, &y, &out}));
  const cudaStream_t stream = current_stream(device_index(x));
  dispatch_y(y.scalar_type(), [&](auto yt) {
    using Y = typename decltype(yt)::type;
    kernels::ScaledResidualForwardArgs<float, Y> a;
    a.x = ptr<const float>(x);
    a.y = ptr<const Y>(y);
    a.gamma = ptr<const float>(gamma);
    a.scale = ptr<const float>(scale);
    a.rows_per_sample = rows_per_sample;
    a.out = ptr<float>(out);
    kernels::scaled_residual_forward<float, Y>(p, a, stream);
  });
  return out;
}

ScaledResidualBackward scaled_residual_backward(const at::Tensor& dout, const at::Tensor& y, const at::Tensor& gamma,
                                                const at::Tensor& scale, int64_t rows_per_sample) {
  const c10::DeviceGuard guard(y.device());
  ScaledResidualBackward out;
  out.dy = at::empty_like(y);
  out.dgamma = at::empty({width_of(y)}, y.options().dtype(at::kFloat));
  const kernels::RowPlan p = plan_for(y, rows_of(y), width_of(y), max_vec({&dout, &y, &out.dy}));
  const at::Tensor ws = workspace(p, y);
  const cudaStream_t stream = current_stream(device_index(y));
  dispatch_y(y.scalar_type(), [&](auto yt) {
    using Y = typename decltype(yt)::type;
    kernels::ScaledResidualBackwardArgs<float, Y> a;
    a.dout = ptr<const float>(dout);
    a.y = ptr<const Y>(y);
    a.gamma = ptr<const float>(gamma);
    a.scale = ptr<const float>(scale);
    a.rows_per_sample = rows_per_sample;
    a.dy = ptr<Y>(out.dy);
    a.dgamma = ptr<float>(out.dgamma);
    a.workspace = ws.data_ptr();
    kernels::scaled_residual_backward<float, Y>(p, a, stream);
  });
  return out;
}

}  // namespace rn50::ops::detail::layer_norm
