// ops/max_pool.cpp: max_pool2d's and bn_relu_max_pool2d's dispatch, their autograd functions and the paths they fall
// back to (every build; the kernels sit behind ops/max_pool_backend.h and ops/fused_batch_norm_backend.h).
#include "ops/max_pool.h"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/custom_function.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "ops/fused_batch_norm.h"
#include "ops/fused_batch_norm_backend.h"
#include "ops/max_pool_backend.h"

namespace rn50::ops {
namespace {

// Beyond this a window field cannot be narrowed to the kernels' ints (and no window that large is pooled).
constexpr int64_t kMaxWindowField = 65535;

bool window_in_range(const MaxPool2d& p) {
  for (const int64_t v : {p.kernel_h, p.kernel_w, p.stride_h, p.stride_w, p.pad_h, p.pad_w}) {
    if (v < 0 || v > kMaxWindowField) return false;
  }
  return true;
}

// What torch::nn::functional::max_pool2d runs: the model with fusion off, and the reference of the tests.
at::Tensor aten_path(const at::Tensor& x, const MaxPool2d& p) {
  return at::max_pool2d(x, {p.kernel_h, p.kernel_w}, {p.stride_h, p.stride_w}, {p.pad_h, p.pad_w}, {1, 1},
                        /*ceil_mode=*/false);
}

// The shape travels to the backward as ten ints in saved_data.
std::vector<int64_t> pack_shape(const kernels::PoolShape& s) {
  return {s.n, s.c, s.h, s.w, s.kh, s.kw, s.sh, s.sw, s.ph, s.pw};
}

kernels::PoolShape unpack_shape(const std::vector<int64_t>& v) {
  kernels::PoolShape s;
  s.n = v.at(0);
  s.c = v.at(1);
  s.h = v.at(2);
  s.w = v.at(3);
  s.kh = static_cast<int>(v.at(4));
  s.kw = static_cast<int>(v.at(5));
  s.sh = static_cast<int>(v.at(6));
  s.sw = static_cast<int>(v.at(7));
  s.ph = static_cast<int>(v.at(8));
  s.pw = static_cast<int>(v.at(9));
  return s;
}

// Keeps only the one-byte positions for the backward: not x (the backward needs only where each max came from) and
// not ATen's int64 indices.
class MaxPoolFunction : public torch::autograd::Function<MaxPoolFunction> {
 public:
  static torch::autograd::variable_list forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x,
                                                const kernels::PoolShape& shape) {
    MaxPoolForward out = detail::max_pool_forward(x, shape);
    ctx->saved_data["positions"] = out.positions;
    ctx->saved_data["shape"] = pack_shape(shape);
    return {out.y};
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad_outputs) {
    const at::Tensor positions = ctx->saved_data["positions"].toTensor();
    const kernels::PoolShape shape = unpack_shape(ctx->saved_data["shape"].toIntVector());
    // One gradient per forward argument: x, and none for the shape.
    return {detail::max_pool_backward(grad_outputs[0], positions, shape), at::Tensor()};
  }
};

// The BatchNorm's running statistics and settings, unseen by autograd (buffers the forward updates in place).
struct NormPoolSettings {
  at::Tensor running_mean, running_var;
  double momentum = 0.1, eps = 1e-5;
  kernels::PoolShape shape;
};

// Keeps x, the batch statistics, the one-byte positions and x at each output's max (a quarter of x at the stem's
// stride 2): not relu(batch_norm(x)), which the two ops apart keep for ReLU's backward (the positions say where ReLU
// passes a gradient).
class BnReluMaxPoolFunction : public torch::autograd::Function<BnReluMaxPoolFunction> {
 public:
  static torch::autograd::variable_list forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x,
                                                const at::Tensor& weight, const at::Tensor& bias,
                                                const NormPoolSettings& s) {
    detail::ForwardIn in;
    in.x = x;
    in.weight = weight;
    in.bias = bias;
    in.running_mean = s.running_mean;
    in.running_var = s.running_var;
    in.momentum = s.momentum;
    in.eps = s.eps;
    in.kernels = BnKernels::kOwn;
    in.stats_only = true;
    const detail::ForwardOut stats = detail::forward(in);
    MaxPoolForward out = detail::bn_relu_max_pool_forward(x, s.shape, weight, bias, stats.mean, stats.invstd);
    ctx->save_for_backward({x, weight, bias});
    ctx->saved_data["mean"] = stats.mean;
    ctx->saved_data["invstd"] = stats.invstd;
    ctx->saved_data["positions"] = out.positions;
    ctx->saved_data["x_at"] = out.x_at;
    ctx->saved_data["shape"] = pack_shape(s.shape);
    ctx->saved_data["eps"] = s.eps;
    return {out.y};
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad_outputs) {
    const torch::autograd::variable_list saved = ctx->get_saved_variables();
    const kernels::PoolShape shape = unpack_shape(ctx->saved_data["shape"].toIntVector());
    detail::BackwardIn in;
    // BatchNorm's backward passes gather each element's gradient from the pool's as they read it: the gradient ReLU
    // passes, none where the max was not above zero.
    in.pool_dy = grad_outputs[0];
    in.pool_positions = ctx->saved_data["positions"].toTensor();
    in.pool_x_at = ctx->saved_data["x_at"].toTensor();
    in.pool_shape = shape;
    in.x = saved[0];
    in.weight = saved[1];
    in.bias = saved[2];
    in.mean = ctx->saved_data["mean"].toTensor();
    in.invstd = ctx->saved_data["invstd"].toTensor();
    in.relu = false;
    in.eps = ctx->saved_data["eps"].toDouble();
    in.kernels = BnKernels::kOwn;
    const detail::BackwardOut g = detail::backward(in);
    // One gradient per forward argument: x, weight, bias, and none for the settings.
    return {g.dx, g.dweight, g.dbias, at::Tensor()};
  }
};

}  // namespace

std::string bn_relu_max_pool_unsupported_reason(const at::Tensor& x, const BatchNormState& bn, const MaxPool2d& pool,
                                                BnKernels kernels) {
  if (kernels != BnKernels::kAuto && kernels != BnKernels::kOwn) {
    return std::string("bn_kernels: ") + to_string(kernels);
  }
  if (!bn.training) return "evaluation";
  std::string why = max_pool_unsupported_reason(x, pool);
  if (why.empty() && bn.weight.defined() && bn.weight.numel() != x.size(1)) why = "a BatchNorm of another size";
  if (why.empty()) why = batch_norm_state_unsupported_reason(x, bn);
  if (why.empty() && pool.kernel_h * pool.kernel_w > kernels::kNoGradient) {
    why = "a window of 256 elements (the fused op keeps position 255 for no gradient)";
  }
  return why;
}

at::Tensor bn_relu_max_pool2d(const at::Tensor& x, const BatchNormState& bn, const MaxPool2d& pool,
                              BnKernels kernels) {
  check_batch_norm_args(x, bn, {});
  if (!bn_relu_max_pool_unsupported_reason(x, bn, pool, kernels).empty()) {
    return max_pool2d(batch_norm_act(x, bn, {}, true, kernels), pool);
  }
  NormPoolSettings s;
  s.running_mean = bn.running_mean;
  s.running_var = bn.running_var;
  s.momentum = bn.momentum;
  s.eps = bn.eps;
  s.shape = max_pool_shape(x, pool);
  at::Tensor y = BnReluMaxPoolFunction::apply(x, bn.weight, bn.bias, s)[0];
  count_batch_norm_step(bn);
  return y;
}

std::string max_pool_unsupported_reason(const at::Tensor& x, const MaxPool2d& pool) {
  // The device, build, rank, dtype and layout rules are the fused BatchNorm's: the same tensors reach both.
  const std::string why = fused_unsupported_reason(x);
  if (!why.empty()) return why;
  if (!window_in_range(pool)) return "a kernel, stride or padding outside 0-65535";
  return kernels::pool_unsupported_reason(max_pool_shape(x, pool));
}

std::string describe_max_pool(const at::Tensor& x, const MaxPool2d& pool) {
  const std::string why = max_pool_unsupported_reason(x, pool);
  return why.empty() ? "rn50" : "ATen (" + why + ")";
}

at::Tensor max_pool2d(const at::Tensor& x, const MaxPool2d& pool) {
  if (!x.defined()) throw std::invalid_argument("max_pool2d: x is undefined");
  if (!max_pool_unsupported_reason(x, pool).empty()) return aten_path(x, pool);
  return MaxPoolFunction::apply(x, max_pool_shape(x, pool))[0];
}

kernels::PoolShape max_pool_shape(const at::Tensor& x, const MaxPool2d& p) {
  if (x.dim() != 4) throw std::invalid_argument("max_pool_shape: expected a 4-D tensor [N, C, H, W]");
  kernels::PoolShape s;
  s.n = x.size(0);
  s.c = x.size(1);
  s.h = x.size(2);
  s.w = x.size(3);
  s.kh = static_cast<int>(p.kernel_h);
  s.kw = static_cast<int>(p.kernel_w);
  s.sh = static_cast<int>(p.stride_h);
  s.sw = static_cast<int>(p.stride_w);
  s.ph = static_cast<int>(p.pad_h);
  s.pw = static_cast<int>(p.pad_w);
  return s;
}

MaxPoolForward max_pool2d_positions(const at::Tensor& x, const MaxPool2d& pool) {
  const std::string why = x.defined() ? max_pool_unsupported_reason(x, pool) : "an undefined tensor";
  if (!why.empty()) throw std::invalid_argument("max_pool2d_positions: rn50's kernels do not take this x: " + why);
  return detail::max_pool_forward(x, max_pool_shape(x, pool));
}

}  // namespace rn50::ops
