// models/blocks.cpp: the pieces several models share (models/blocks.h).
#include "models/blocks.h"

#include <ATen/ATen.h>
#include <torch/utils.h>

#include <cmath>
#include <string>
#include <vector>

#include "core/errors.h"
#include "core/torch_compat.h"

namespace rn50::models {

ops::BatchNormState state_of(const torch::nn::BatchNorm2d& bn) {
  ops::BatchNormState state;
  if (bn.is_empty()) return state;
  state.weight = bn->weight;
  state.bias = bn->bias;
  state.running_mean = bn->running_mean;
  state.running_var = bn->running_var;
  state.num_batches_tracked = bn->num_batches_tracked;
  state.momentum = bn->options.momentum().value_or(0.1);
  state.eps = bn->options.eps();
  state.training = bn->is_training();
  return state;
}

at::Tensor bn_act(torch::nn::BatchNorm2d bn, const at::Tensor& x, const at::Tensor& residual, bool relu,
                  const ModelOptions& options) {
  if (options.fusion == Fusion::kOff) {
    at::Tensor y = bn->forward(x);
    if (residual.defined()) y.add_(residual);
    return relu ? y.relu_() : y;
  }
  return ops::batch_norm_act(x, state_of(bn), residual, relu, options.bn_kernels);
}

at::Tensor norm_act_silu(torch::nn::BatchNorm2d bn, const at::Tensor& x, const ModelOptions& options) {
  if (options.fusion == Fusion::kOff) return at::silu(bn->forward(x));
  return ops::batch_norm_act(x, state_of(bn), {}, ops::Activation::kSilu, options.bn_kernels);
}

at::ScalarType compute_dtype(const at::Tensor& x) {
  if (x.is_cuda()) {
    if (const auto autocast = compat::cuda_autocast_dtype()) return *autocast;
  }
  return x.scalar_type();
}

at::ScalarType layer_norm_dtype(const at::Tensor& x) {
  return x.is_cuda() && compat::cuda_autocast_dtype() ? at::kFloat : x.scalar_type();
}

ops::AddLayerNormOut add_layer_norm(const at::Tensor& x, const at::Tensor& branch, const torch::nn::LayerNorm& norm,
                                    at::ScalarType out_dtype, const ModelOptions& options) {
  return ops::add_layer_norm(x, branch, norm->weight, norm->bias, norm->options.eps(), out_dtype,
                             options.fusion != Fusion::kOff);
}

at::Tensor layer_norm_channels(const at::Tensor& x, const torch::nn::LayerNorm& norm, at::ScalarType out_dtype,
                               const ModelOptions& options) {
  return add_layer_norm(x.permute({0, 2, 3, 1}), {}, norm, out_dtype, options).y.permute({0, 3, 1, 2});
}

at::Tensor linear(const torch::nn::Linear& fc, const at::Tensor& x) { return at::linear(x, fc->weight, fc->bias); }

at::Tensor gelu(const at::Tensor& x, const ModelOptions& /*options*/) { return at::gelu(x); }

at::Tensor stochastic_depth_scale(const at::Tensor& x, double p, bool training) {
  if (!training || p == 0.0) return {};
  const double survival = 1.0 - p;
  at::Tensor noise = at::empty({x.size(0)}, x.options().dtype(at::kFloat)).bernoulli_(survival);
  if (survival > 0.0) noise.div_(survival);
  return noise;
}

at::Tensor stochastic_depth(const at::Tensor& x, double p, bool training) {
  const at::Tensor scale = stochastic_depth_scale(x, p, training);
  if (!scale.defined()) return x;
  std::vector<int64_t> size(static_cast<size_t>(x.dim()), 1);
  size[0] = x.size(0);
  return x * scale.to(x.scalar_type()).view(size);
}

double probability_or_default(double requested, double torchvision_default, const char* key) {
  if (requested < 0) return torchvision_default;
  if (requested > 1) {
    throw ConfigError(std::string("config key '") + key + "': " + std::to_string(requested) +
                      " is not a probability (0 to 1)");
  }
  return requested;
}

void trunc_normal_(at::Tensor t, double std, double mean, double a, double b) {
  torch::NoGradGuard no_grad;
  auto cdf = [](double v) { return (1.0 + std::erf(v / std::sqrt(2.0))) / 2.0; };
  const double low = cdf((a - mean) / std), high = cdf((b - mean) / std);
  t.uniform_(2 * low - 1, 2 * high - 1);
  t.erfinv_();
  t.mul_(std * std::sqrt(2.0));
  t.add_(mean);
  t.clamp_(a, b);
}

}  // namespace rn50::models
