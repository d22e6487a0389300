// ops/fused_layer_norm_backend.h: what the dispatch (ops/fused_layer_norm.cpp) asks of the row kernels' glue, with no
// CUDA types, so that every build compiles the dispatch: CUDA builds link ops/fused_layer_norm_cuda.cpp, CPU builds
// ops/fused_layer_norm_none.cpp.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/ScalarType.h>

#include <optional>
#include <string>

namespace rn50::ops::detail::layer_norm {

// True when the CUDA glue is linked (a CUDA build).
bool built_with_cuda();

// Why the kernels would not take rows of `width` with these dtypes (empty: they would): x's (the sum's), the branch's
// (none: no branch) and the output's.
std::string kernel_unsupported_reason(at::ScalarType x, std::optional<at::ScalarType> branch, at::ScalarType y,
                                      int64_t width);

// All on one CUDA device, contiguous: x and branch [rows, width] (branch undefined: none), weight and bias float32.
struct Forward {
  at::Tensor sum, y, mean, rstd;  // sum: undefined without a branch; mean, rstd: float32 [rows]
};
Forward forward(const at::Tensor& x, const at::Tensor& branch, const at::Tensor& weight, const at::Tensor& bias,
                double eps, at::ScalarType out_dtype);

struct Backward {
  at::Tensor dx, dbranch, dweight, dbias;  // dbranch: undefined unless branch_dtype is given
};
// dy: y's gradient; dsum: the sum's gradient from its other users (may be undefined); s: the sum (or x).
Backward backward(const at::Tensor& dy, const at::Tensor& dsum, const at::Tensor& s, const at::Tensor& weight,
                  const at::Tensor& mean, const at::Tensor& rstd, std::optional<at::ScalarType> branch_dtype);

// x and y [rows, width] contiguous (x float32), gamma float32 [width], scale float32 [rows / rows_per_sample] or
// undefined.
at::Tensor scaled_residual_forward(const at::Tensor& x, const at::Tensor& y, const at::Tensor& gamma,
                                   const at::Tensor& scale, int64_t rows_per_sample);
struct ScaledResidualBackward {
  at::Tensor dy, dgamma;
};
ScaledResidualBackward scaled_residual_backward(const at::Tensor& dout, const at::Tensor& y, const at::Tensor& gamma,
                                                const at::Tensor& scale, int64_t rows_per_sample);

}  // namespace rn50::ops::detail::layer_norm
