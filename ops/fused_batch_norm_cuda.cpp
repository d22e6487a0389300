// ops/fused_batch_norm_cuda.cpp: the fused BatchNorm's CUDA side (CUDA builds only): rn50's kernels and cuDNN's fused
// BatchNorm+add+activation, on the current stream, with outputs and workspaces from the caching allocator, so that a
// CUDA graph can capture them.
#include <ATen/ATen.h>
#include <c10/core/DeviceGuard.h>
#include <cudnn.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <tuple>

#include "core/check.h"
#include "cuda/cudnn_check.h"
#include "ops/batch_norm_kernels.h"
#include "ops/cudnn_handle.h"
#include "ops/current_stream.h"
#include "ops/fused_batch_norm_backend.h"

namespace rn50::ops::detail {
namespace {

constexpr auto kChannelsLast = at::MemoryFormat::ChannelsLast;
// The one mode with fused add and activation; it needs NHWC data (cuDNN: "may be faster ... but imposes some limits
// on the range of values").
constexpr cudnnBatchNormMode_t kMode = CUDNN_BATCHNORM_SPATIAL_PERSISTENT;

at::Tensor empty_nhwc_like(const at::Tensor& x) {
  return at::empty(x.sizes(), x.options().memory_format(kChannelsLast));
}

at::Tensor empty_floats(int64_t n, const at::Tensor& like) { return at::empty({n}, like.options().dtype(at::kFloat)); }

// At least one byte, so that the pointer handed on is never null.
at::Tensor empty_bytes(size_t n, const at::Tensor& like) {
  return at::empty({static_cast<int64_t>(std::max<size_t>(n, 1))}, like.options().dtype(at::kByte));
}

template <typename T>
T* ptr(const at::Tensor& t) {
  return t.defined() ? static_cast<T*>(t.data_ptr()) : nullptr;
}

bool aligned16(std::initializer_list<const at::Tensor*> tensors) {
  for (const at::Tensor* t : tensors) {
    if (t->defined() && reinterpret_cast<uintptr_t>(t->data_ptr()) % 16 != 0) return false;
  }
  return true;
}

int64_t channels_of(const at::Tensor& x) { return x.size(1); }
int64_t rows_of(const at::Tensor& x) { return x.numel() / x.size(1); }
int device_index(const at::Tensor& x) { return static_cast<int>(x.get_device()); }

// ---- rn50's kernels ------------------------------------------------------------------------------------------------

template <typename T>
ForwardOut own_forward(const ForwardIn& in, cudaStream_t stream) {
  const at::Tensor& x = in.x;
  ForwardOut out;
  if (!in.stats_only) out.y = empty_nhwc_like(x);
  if (in.training) {
    out.mean = empty_floats(channels_of(x), x);
    out.invstd = empty_floats(channels_of(x), x);
  } else {
    // Evaluation normalises with the running statistics; copies, so that a later training step's update cannot
    // change what this forward's backward reads.
    out.mean = in.running_mean.clone();
    out.invstd = at::reciprocal(at::sqrt(in.running_var + in.eps));
  }
  const kernels::Plan plan =
      kernels::make_plan<T>(rows_of(x), channels_of(x), aligned16({&x, &in.residual, &out.y}), device_index(x));
  const at::Tensor workspace = in.training ? empty_bytes(plan.workspace_bytes, x) : at::Tensor();
  kernels::ForwardArgs<T> a;
  a.x = ptr<const T>(x);
  a.residual = ptr<const T>(in.residual);
  a.y = ptr<T>(out.y);
  a.weight = ptr<const float>(in.weight);
  a.bias = ptr<const float>(in.bias);
  a.running_mean = in.training ? ptr<float>(in.running_mean) : nullptr;
  a.running_var = in.training ? ptr<float>(in.running_var) : nullptr;
  a.mean = ptr<float>(out.mean);
  a.invstd = ptr<float>(out.invstd);
  a.momentum = in.momentum;
  a.eps = in.eps;
  a.relu = in.relu;
  a.silu = in.silu;
  a.batch_stats = in.training;
  a.workspace = workspace.defined() ? workspace.data_ptr() : nullptr;
  if (in.relu_bits && in.relu && in.residual.defined() && in.training && out.y.defined() && sizeof(T) == 2 &&
      plan.vec == 8) {
    out.relu_bits = at::empty({x.numel() / 8}, x.options().dtype(at::kByte));
    a.relu_bits = ptr<uint8_t>(out.relu_bits);
  }
  kernels::batch_norm_forward<T>(plan, a, stream);
  out.ran = Ran::kOwn;
  return out;
}

template <typename T>
BackwardOut own_backward(const BackwardIn& in, const at::Tensor& dy, cudaStream_t stream) {
  const at::Tensor& x = in.x;
  BackwardOut out;
  out.dx = empty_nhwc_like(x);
  // The residual's gradient is g: the masked dy, which the reduction stores; without ReLU it is dy itself.
  if (in.has_residual) out.dresidual = in.relu ? empty_nhwc_like(x) : dy;
  out.dweight = empty_floats(channels_of(x), x);
  out.dbias = empty_floats(channels_of(x), x);
  const at::Tensor y = in.relu ? in.y : at::Tensor();
  const kernels::Plan plan = kernels::make_plan<T>(rows_of(x), channels_of(x),
                                                   aligned16({&dy, &x, &y, &out.dx, &out.dresidual}), device_index(x));
  const at::Tensor workspace = empty_bytes(plan.workspace_bytes, x);
  kernels::BackwardArgs<T> a;
  a.dy = ptr<const T>(dy);
  a.x = ptr<const T>(x);
  a.y = ptr<const T>(y);
  a.weight = ptr<const float>(in.weight);
  a.bias = ptr<const float>(in.bias);
  a.mean = ptr<const float>(in.mean);
  a.invstd = ptr<const float>(in.invstd);
  a.dx = ptr<T>(out.dx);
  a.dresidual = (in.has_residual && in.relu) ? ptr<T>(out.dresidual) : nullptr;
  a.dweight = ptr<float>(out.dweight);
  a.dbias = ptr<float>(out.dbias);
  a.relu = in.relu;
  a.silu = in.silu;
  a.batch_stats = in.training;
  a.workspace = workspace.data_ptr();
  if (in.relu && in.relu_bits.defined()) {
    if (in.relu_bits.scalar_type() != at::kByte || in.relu_bits.device() != x.device() ||
        !in.relu_bits.is_contiguous() || in.relu_bits.numel() * 8 != x.numel()) {
      throw std::invalid_argument("fused batch_norm: relu_bits must be contiguous uint8 [numel / 8] on x's device");
    }
    // Read where the plan runs 16-byte vectors of half or bfloat16 (a byte a vector); else y below.
    if (sizeof(T) == 2 && plan.vec == 8) a.relu_bits = ptr<const uint8_t>(in.relu_bits);
  }
  if (in.relu && a.relu_bits == nullptr && !y.defined()) {
    throw std::invalid_argument("fused batch_norm: ReLU's backward has neither y nor usable relu_bits");
  }
  kernels::batch_norm_backward<T>(plan, a, stream);
  return out;
}

// The pool's gather inside BatchNorm's backward passes (BackwardIn::pool_dy): no input-sized gradient in between.
template <typename T>
BackwardOut own_backward_pooled(const BackwardIn& in, cudaStream_t stream) {
  const at::Tensor& x = in.x;
  const at::Tensor pool_dy = in.pool_dy.contiguous(kChannelsLast);
  BackwardOut out;
  out.dx = empty_nhwc_like(x);
  out.dweight = empty_floats(channels_of(x), x);
  out.dbias = empty_floats(channels_of(x), x);
  const bool aligned = aligned16({&x, &out.dx, &pool_dy, &in.pool_positions, &in.pool_x_at});
  const kernels::Plan plan = kernels::make_plan<T>(rows_of(x), channels_of(x), aligned, device_index(x));
  const kernels::PoolPlan pool = kernels::make_pool_plan(in.pool_shape, sizeof(T), aligned);
  const at::Tensor workspace = empty_bytes(plan.workspace_bytes, x);
  kernels::BackwardArgs<T> a;
  a.x = ptr<const T>(x);
  a.weight = ptr<const float>(in.weight);
  a.bias = ptr<const float>(in.bias);
  a.mean = ptr<const float>(in.mean);
  a.invstd = ptr<const float>(in.invstd);
  a.dx = ptr<T>(out.dx);
  a.dweight = ptr<float>(out.dweight);
  a.dbias = ptr<float>(out.dbias);
  a.relu = false;
  a.batch_stats = true;
  a.workspace = workspace.data_ptr();
  kernels::batch_norm_backward_pooled<T>(plan, a, pool, ptr<const T>(pool_dy), ptr<const uint8_t>(in.pool_positions),
                                         ptr<const T>(in.pool_x_at), stream);
  return out;
}

ForwardOut own_forward_any(const ForwardIn& in, cudaStream_t stream) {
  switch (in.x.scalar_type()) {
    case at::kFloat:
      return own_forward<float>(in, stream);
    case at::kHalf:
      return own_forward<__half>(in, stream);
    case at::kBFloat16:
      return own_forward<__nv_bfloat16>(in, stream);
    default:
      throw std::invalid_argument("fused batch_norm_act: dtype " + std::string(c10::toString(in.x.scalar_type())));
  }
}

BackwardOut own_backward_any(const BackwardIn& in, const at::Tensor& dy, cudaStream_t stream) {
  if (in.pool_dy.defined()) {
    if (in.relu || in.silu || in.has_residual || !in.training || in.pool_dy.scalar_type() != in.x.scalar_type()) {
      throw std::invalid_argument("batch_norm backward from a pool: training BatchNorm alone, the pool's dtype");
    }
    switch (in.x.scalar_type()) {
      case at::kFloat:
        return own_backward_pooled<float>(in, stream);
      case at::kHalf:
        return own_backward_pooled<__half>(in, stream);
      case at::kBFloat16:
        return own_backward_pooled<__nv_bfloat16>(in, stream);
      default:
        break;
    }
  }
  switch (in.x.scalar_type()) {
    case at::kFloat:
      return own_backward<float>(in, dy, stream);
    case at::kHalf:
      return own_backward<__half>(in, dy, stream);
    case at::kBFloat16:
      return own_backward<__nv_bfloat16>(in, dy, stream);
    default:
      throw std::invalid_argument("fused batch_norm_act: dtype " + std::string(c10::toString(in.x.scalar_type())));
  }
}

// ---- cuDNN ---------------------------------------------------------------------------------------------------------

// Owns one cuDNN descriptor, made by `create` and released by `destroy`.
template <typename Handle, cudnnStatus_t (*create)(Handle*), cudnnStatus_t (*destroy)(Handle)>
class CudnnObject {
 public:
  CudnnObject() { RN50_CUDNN_CHECK(create(&handle_)); }
  ~CudnnObject() { destroy(handle_); }
  CudnnObject(const CudnnObject&) = delete;
  CudnnObject& operator=(const CudnnObject&) = delete;
  Handle get() const { return handle_; }

 private:
  Handle handle_ = nullptr;
};

using TensorDescriptor =
    CudnnObject<cudnnTensorDescriptor_t, cudnnCreateTensorDescriptor, cudnnDestroyTensorDescriptor>;
using ActivationDescriptor =
    CudnnObject<cudnnActivationDescriptor_t, cudnnCreateActivationDescriptor, cudnnDestroyActivationDescriptor>;

// One shape's descriptors and cuDNN's sizes for it, found once.
struct CudnnPlan {
  TensorDescriptor data;   // x, y, the residual and their gradients: one NHWC shape
  TensorDescriptor param;  // weight, bias, mean, invstd, running statistics: float [1, C, 1, 1]
  ActivationDescriptor relu;
  cudnnBatchNormOps_t ops = CUDNN_BATCHNORM_OPS_BN;
  bool activation = false;
  bool residual = false;
  size_t forward_workspace = 0, backward_workspace = 0, reserve = 0;
  std::string unsupported;  // empty: cuDNN takes it, as far as its queries and calls so far told
};

// device, N, C, H, W, dtype, residual, relu
using PlanKey = std::tuple<int, int64_t, int64_t, int64_t, int64_t, int, bool, bool>;

// The plans found on this thread (a thread's own, as its cuDNN handle is: ops/cudnn_handle.h).
struct ThreadCudnn {
  std::map<PlanKey, std::unique_ptr<CudnnPlan>> plans;
};

// Never destroyed, as the handle they were made with (ops/cudnn_handle.cpp: cuDNN calls from thread-local destructors
// at exit crashed).
ThreadCudnn& thread_cudnn() {
  thread_local auto* state = new ThreadCudnn();
  return *state;
}

std::string refusal(const char* call, cudnnStatus_t status) {
  return std::string(call) + ": " + cudnnGetErrorString(status);
}

bool cudnn_dtype(at::ScalarType t, cudnnDataType_t* out) {
  switch (t) {
    case at::kFloat:
      *out = CUDNN_DATA_FLOAT;
      return true;
    case at::kHalf:
      *out = CUDNN_DATA_HALF;
      return true;
    case at::kBFloat16:
      *out = CUDNN_DATA_BFLOAT16;
      return true;
    default:
      return false;
  }
}

CudnnPlan& cudnn_plan(const at::Tensor& x, bool residual, bool relu) {
  const int device = device_index(x);
  const PlanKey key{device,   x.size(0), x.size(1), x.size(2), x.size(3), static_cast<int>(x.scalar_type()),
                    residual, relu};
  auto& plans = thread_cudnn().plans;
  auto found = plans.find(key);
  if (found != plans.end()) return *found->second;
  auto plan = std::make_unique<CudnnPlan>();
  CudnnPlan& p = *plan;
  p.residual = residual;
  p.activation = relu;
  p.ops = relu ? (residual ? CUDNN_BATCHNORM_OPS_BN_ADD_ACTIVATION : CUDNN_BATCHNORM_OPS_BN_ACTIVATION)
               : CUDNN_BATCHNORM_OPS_BN;
  cudnnDataType_t dtype = CUDNN_DATA_FLOAT;
  if (residual && !relu) {
    p.unsupported = "cuDNN has no BatchNorm+add without an activation";
  } else if (!cudnn_dtype(x.scalar_type(), &dtype)) {
    p.unsupported = std::string("dtype ") + c10::toString(x.scalar_type());
  } else if (x.numel() > std::numeric_limits<int32_t>::max()) {
    p.unsupported = "more than 2^31 elements";
  } else {
    const auto dim = [&](int d) { return static_cast<int>(x.size(d)); };
    cudnnStatus_t s =
        cudnnSetTensor4dDescriptor(p.data.get(), CUDNN_TENSOR_NHWC, dtype, dim(0), dim(1), dim(2), dim(3));
    if (s != CUDNN_STATUS_SUCCESS) p.unsupported = refusal("cudnnSetTensor4dDescriptor", s);
    if (p.unsupported.empty()) {
      s = cudnnDeriveBNTensorDescriptor(p.param.get(), p.data.get(), kMode);
      if (s != CUDNN_STATUS_SUCCESS) p.unsupported = refusal("cudnnDeriveBNTensorDescriptor", s);
    }
    RN50_CUDNN_CHECK(cudnnSetActivationDescriptor(p.relu.get(), CUDNN_ACTIVATION_RELU, CUDNN_PROPAGATE_NAN, 0.0));
    const cudnnHandle_t handle = cudnn_handle(device);
    const cudnnTensorDescriptor_t data = p.data.get();
    const cudnnActivationDescriptor_t act = relu ? p.relu.get() : nullptr;
    if (p.unsupported.empty()) {
      s = cudnnGetBatchNormalizationForwardTrainingExWorkspaceSize(
          handle, kMode, p.ops, data, residual ? data : nullptr, data, p.param.get(), act, &p.forward_workspace);
      if (s != CUDNN_STATUS_SUCCESS)
        p.unsupported = refusal("cudnnGetBatchNormalizationForwardTrainingExWorkspaceSize", s);
    }
    if (p.unsupported.empty()) {
      s = cudnnGetBatchNormalizationBackwardExWorkspaceSize(handle, kMode, p.ops, data, relu ? data : nullptr, data,
                                                            residual ? data : nullptr, data, p.param.get(), act,
                                                            &p.backward_workspace);
      if (s != CUDNN_STATUS_SUCCESS) p.unsupported = refusal("cudnnGetBatchNormalizationBackwardExWorkspaceSize", s);
    }
    if (p.unsupported.empty()) {
      s = cudnnGetBatchNormalizationTrainingExReserveSpaceSize(handle, kMode, p.ops, act, data, &p.reserve);
      if (s != CUDNN_STATUS_SUCCESS) p.unsupported = refusal("cudnnGetBatchNormalizationTrainingExReserveSpaceSize", s);
    }
  }
  return *plans.emplace(key, std::move(plan)).first->second;
}

// cuDNN's fused forward (training); false, with the reason, where cuDNN refuses the case.
bool cudnn_forward(const ForwardIn& in, cudaStream_t stream, ForwardOut* out, std::string* why) {
  const at::Tensor& x = in.x;
  const bool residual = in.residual.defined();
  CudnnPlan& p = cudnn_plan(x, residual, in.relu);
  if (!p.unsupported.empty()) {
    *why = p.unsupported;
    return false;
  }
  const cudnnHandle_t handle = cudnn_handle(device_index(x));
  RN50_CUDNN_CHECK(cudnnSetStream(handle, stream));
  ForwardOut result;
  result.y = empty_nhwc_like(x);
  result.mean = empty_floats(channels_of(x), x);
  result.invstd = empty_floats(channels_of(x), x);
  result.reserve = empty_bytes(p.reserve, x);
  const at::Tensor workspace = empty_bytes(p.forward_workspace, x);
  const float one = 1.0f, zero = 0.0f;
  const cudnnTensorDescriptor_t data = p.data.get();
  const cudnnStatus_t status = cudnnBatchNormalizationForwardTrainingEx(
      handle, kMode, p.ops, &one, &zero, data, x.data_ptr(), residual ? data : nullptr,
      residual ? in.residual.data_ptr() : nullptr, data, result.y.data_ptr(), p.param.get(), in.weight.data_ptr(),
      in.bias.data_ptr(), in.momentum, in.running_mean.data_ptr(), in.running_var.data_ptr(), in.eps,
      result.mean.data_ptr(), result.invstd.data_ptr(), p.activation ? p.relu.get() : nullptr, workspace.data_ptr(),
      p.forward_workspace, result.reserve.data_ptr(), p.reserve);
  if (status == CUDNN_STATUS_NOT_SUPPORTED) {
    p.unsupported = refusal("cudnnBatchNormalizationForwardTrainingEx", status);
    *why = p.unsupported;
    return false;
  }
  if (status != CUDNN_STATUS_SUCCESS) {
    throw_call_failed("cudnnBatchNormalizationForwardTrainingEx", __FILE__, __LINE__, cudnnGetErrorString(status));
  }
  result.ran = Ran::kCudnn;
  *out = std::move(result);
  return true;
}

// cuDNN's fused backward, after a cuDNN forward (it reads the forward's reserve space).
bool cudnn_backward(const BackwardIn& in, const at::Tensor& dy, cudaStream_t stream, BackwardOut* out,
                    std::string* why) {
  const at::Tensor& x = in.x;
  CudnnPlan& p = cudnn_plan(x, in.has_residual, in.relu);
  if (!p.unsupported.empty()) {
    *why = p.unsupported;
    return false;
  }
  const cudnnHandle_t handle = cudnn_handle(device_index(x));
  RN50_CUDNN_CHECK(cudnnSetStream(handle, stream));
  BackwardOut result;
  result.dx = empty_nhwc_like(x);
  if (in.has_residual) result.dresidual = empty_nhwc_like(x);
  result.dweight = empty_floats(channels_of(x), x);
  result.dbias = empty_floats(channels_of(x), x);
  const at::Tensor workspace = empty_bytes(p.backward_workspace, x);
  const float one = 1.0f, zero = 0.0f;
  const cudnnTensorDescriptor_t data = p.data.get();
  const cudnnStatus_t status = cudnnBatchNormalizationBackwardEx(
      handle, kMode, p.ops, &one, &zero, &one, &zero, data, x.data_ptr(), p.activation ? data : nullptr,
      p.activation ? in.y.data_ptr() : nullptr, data, dy.data_ptr(), p.residual ? data : nullptr,
      p.residual ? result.dresidual.data_ptr() : nullptr, data, result.dx.data_ptr(), p.param.get(),
      in.weight.data_ptr(), p.activation ? in.bias.data_ptr() : nullptr, result.dweight.data_ptr(),
      result.dbias.data_ptr(), in.eps, in.mean.data_ptr(), in.invstd.data_ptr(), p.activation ? p.relu.get() : nullptr,
      workspace.data_ptr(), p.backward_workspace, in.reserve.data_ptr(), p.reserve);
  if (status == CUDNN_STATUS_NOT_SUPPORTED) {
    *why = refusal("cudnnBatchNormalizationBackwardEx", status);
    return false;
  }
  if (status != CUDNN_STATUS_SUCCESS)
    throw_call_failed("cudnnBatchNormalizationBackwardEx", __FILE__, __LINE__, cudnnGetErrorString(status));
  *out = std::move(result);
  return true;
}

}  // namespace

bool built_with_cuda() { return true; }

ForwardOut forward(const ForwardIn& in) {
  const c10::DeviceGuard guard(in.x.device());
  const cudaStream_t stream = current_stream(device_index(in.x));
  // cuDNN has no fused inference with add and activation: evaluation runs rn50's kernels.
  if (in.stats_only && !in.training) throw std::invalid_argument("batch_norm: statistics alone are for training");
  const bool want_cudnn = !in.silu && !in.stats_only && (in.kernels == BnKernels::kCudnn ||
                                       (in.kernels == BnKernels::kAuto && auto_prefers_cudnn(in.residual.defined(), in.relu)));
  if (in.training && want_cudnn) {
    ForwardOut out;
    std::string why;
    if (cudnn_forward(in, stream, &out, &why)) return out;
    if (in.kernels == BnKernels::kCudnn) {
      throw std::invalid_argument("batch_norm_act: cuDNN's fused kernels do not take this case (" + why + ")");
    }
  }
  return own_forward_any(in, stream);
}

BackwardOut backward(const BackwardIn& in) {
  const c10::DeviceGuard guard(in.x.device());
  const cudaStream_t stream = current_stream(device_index(in.x));
  // Gradients arrive in whatever layout the next op produced (a broadcast, an NCHW copy); both kernel families read
  // dense channels-last.
  const at::Tensor dy = in.dy.defined() ? in.dy.contiguous(kChannelsLast) : at::Tensor();
  if (in.ran == Ran::kCudnn && !in.pool_dy.defined()) {
    BackwardOut out;
    std::string why;
    if (cudnn_backward(in, dy, stream, &out, &why)) return out;
    if (in.kernels == BnKernels::kCudnn) {
      throw std::runtime_error("batch_norm_act: cuDNN's fused backward refused a case its forward took (" + why + ")");
    }
  }
  return own_backward_any(in, dy, stream);
}

std::string cudnn_unsupported_reason(const at::Tensor& x, bool residual, bool relu) {
  const c10::DeviceGuard guard(x.device());
  return cudnn_plan(x, residual, relu).unsupported;
}

}  // namespace rn50::ops::detail
