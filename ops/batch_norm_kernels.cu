// ops/batch_norm_kernels.cu: rn50's own BatchNorm(+add)+ReLU kernels: the __global__ wrappers around
// ops/batch_norm_kernels_impl.cuh and their launches (forward: statistics partials, finalize, normalise; backward:
// gradient partials, finalize, dx).
#include <cstdint>
#include <stdexcept>
#include <string>

#include "cuda/cuda_check.h"
#include "cuda/launch.h"
#include "ops/batch_norm_kernels.h"
#include "ops/batch_norm_kernels_impl.cuh"
#include "ops/max_pool_kernels_impl.cuh"

namespace rn50::ops::kernels {
namespace {

using impl::Idx;

__device__ inline Idx thread_idx() {
  return Idx{static_cast<int>(threadIdx.x), static_cast<int>(threadIdx.y), static_cast<int>(blockIdx.x),
             static_cast<int>(blockIdx.y)};
}

template <typename T, int VEC>
__global__ void __launch_bounds__(impl::kThreads, impl::kBlocksPerSm)
    stats_kernel(Plan p, const T* __restrict__ x, float* __restrict__ part_sum, float* __restrict__ part_sq) {
  __shared__ float s_sum[impl::kThreads * VEC];
  __shared__ float s_sq[impl::kThreads * VEC];
  impl::stats_accumulate<T, VEC>(p, thread_idx(), x, s_sum, s_sq);
  __syncthreads();
  impl::block_partials(p, VEC, threadIdx.y * blockDim.x + threadIdx.x, blockIdx.x, blockIdx.y, s_sum, s_sq, part_sum,
                       part_sq);
}

template <typename T>
__global__ void __launch_bounds__(impl::kFinalizeChannels* impl::kFinalizeGroups)
    finalize_forward_kernel(Plan p, const float* __restrict__ part_sum, const float* __restrict__ part_sq,
                            const T* __restrict__ x, impl::StatsOut out) {
  __shared__ double s_a[impl::kFinalizeChannels * impl::kFinalizeGroups];
  __shared__ double s_b[impl::kFinalizeChannels * impl::kFinalizeGroups];
  impl::finalize_accumulate(p, threadIdx.x, threadIdx.y, blockIdx.x, part_sum, part_sq, s_a, s_b);
  __syncthreads();
  if (threadIdx.y == 0) impl::finalize_forward<T>(p, threadIdx.x, blockIdx.x, s_a, s_b, x, out);
}

template <typename T, int VEC, bool kResidual, bool kRelu, bool kSilu = false>
__global__ void __launch_bounds__(impl::kThreads, impl::kBlocksPerSm)
    normalize_kernel(Plan p, const T* __restrict__ x, const T* __restrict__ residual, T* __restrict__ y,
                     const float* __restrict__ weight, const float* __restrict__ bias, const float* __restrict__ mean,
                     const float* __restrict__ invstd, uint8_t* __restrict__ relu_bits) {
  impl::normalize_rows<T, VEC, kResidual, kRelu, kSilu>(p, thread_idx(), x, residual, y, weight, bias, mean, invstd,
                                                        relu_bits);
}

template <typename T, int VEC, impl::ReluFrom kRelu, bool kWriteG>
__global__ void __launch_bounds__(impl::kThreads, impl::kBlocksPerSm)
    backward_reduce_kernel(Plan p, const T* __restrict__ dy, const T* __restrict__ y,
                           const uint8_t* __restrict__ relu_bits, const T* __restrict__ x,
                           const float* __restrict__ mean, T* __restrict__ g_out, float* __restrict__ part_g,
                           float* __restrict__ part_gx) {
  __shared__ float s_g[impl::kThreads * VEC];
  __shared__ float s_gx[impl::kThreads * VEC];
  impl::backward_accumulate<T, VEC, kRelu, kWriteG>(p, thread_idx(), dy, y, relu_bits, x, mean, g_out, s_g, s_gx);
  __syncthreads();
  impl::block_partials(p, VEC, threadIdx.y * blockDim.x + threadIdx.x, blockIdx.x, blockIdx.y, s_g, s_gx, part_g,
                       part_gx);
}

template <typename T, int VEC>
__global__ void __launch_bounds__(impl::kThreads, impl::kBlocksPerSm)
    backward_reduce_silu_kernel(Plan p, const T* __restrict__ dy, const T* __restrict__ x,
                                const float* __restrict__ mean, const float* __restrict__ weight,
                                const float* __restrict__ bias, const float* __restrict__ invstd,
                                float* __restrict__ part_g, float* __restrict__ part_gx) {
  __shared__ float s_g[impl::kThreads * VEC];
  __shared__ float s_gx[impl::kThreads * VEC];
  impl::backward_accumulate_silu<T, VEC>(p, thread_idx(), dy, x, mean, weight, bias, invstd, s_g, s_gx);
  __syncthreads();
  impl::block_partials(p, VEC, threadIdx.y * blockDim.x + threadIdx.x, blockIdx.x, blockIdx.y, s_g, s_gx, part_g,
                       part_gx);
}

__global__ void __launch_bounds__(impl::kFinalizeChannels* impl::kFinalizeGroups)
    finalize_backward_kernel(Plan p, const float* __restrict__ part_g, const float* __restrict__ part_gx,
                             impl::GradOut out) {
  __shared__ double s_a[impl::kFinalizeChannels * impl::kFinalizeGroups];
  __shared__ double s_b[impl::kFinalizeChannels * impl::kFinalizeGroups];
  impl::finalize_accumulate(p, threadIdx.x, threadIdx.y, blockIdx.x, part_g, part_gx, s_a, s_b);
  __syncthreads();
  if (threadIdx.y == 0) impl::finalize_backward(p, threadIdx.x, blockIdx.x, s_a, s_b, out);
}

template <typename T, int VEC, impl::GradSource kSource>
__global__ void __launch_bounds__(impl::kThreads, impl::kBlocksPerSm)
    dx_kernel(Plan p, const T* __restrict__ grad, const T* __restrict__ y, const T* __restrict__ x,
              impl::DxCoefficients co, T* __restrict__ dx) {
  impl::dx_rows<T, VEC, kSource>(p, thread_idx(), grad, y, x, co, dx);
}

// The backward of BatchNorm without an activation whose gradient a max-pool gives (ops/max_pool.h's
// bn_relu_max_pool2d): the passes above, each reading the gradient through `Grad`: the reduction over the pool's
// outputs (pool_impl::PoolMaskedGrad, x at each output's max), dx over the inputs (pool_impl::PoolGatherGrad). Kept
// apart from the dense kernels, whose __restrict__ pointer parameters a struct member would not carry.
template <typename T, int VEC, class Grad>
__global__ void __launch_bounds__(impl::kThreads, impl::kBlocksPerSm)
    backward_reduce_from_kernel(Plan p, Grad dy, const T* __restrict__ x, const float* __restrict__ mean,
                                float* __restrict__ part_g, float* __restrict__ part_gx) {
  __shared__ float s_g[impl::kThreads * VEC];
  __shared__ float s_gx[impl::kThreads * VEC];
  impl::backward_accumulate_from<T, VEC, impl::ReluFrom::kNone, false>(p, thread_idx(), dy, nullptr, nullptr, x, mean,
                                                                       nullptr, s_g, s_gx);
  __syncthreads();
  impl::block_partials(p, VEC, threadIdx.y * blockDim.x + threadIdx.x, blockIdx.x, blockIdx.y, s_g, s_gx, part_g,
                       part_gx);
}

template <typename T, int VEC, class Grad>
__global__ void __launch_bounds__(impl::kThreads, impl::kGatherBlocksPerSm)
    dx_from_kernel(Plan p, Grad grad, const T* __restrict__ x, impl::DxCoefficients co, T* __restrict__ dx) {
  impl::dx_rows_from<T, VEC, impl::GradSource::kDy>(p, thread_idx(), grad, nullptr, x, co, dx);
}

// The dx pass of batch_norm_backward_pooled by the pool's output blocks (PoolPlan::two_by_two), a 1-D grid-stride loop.
template <typename T, int VEC>
__global__ void __launch_bounds__(impl::kThreads, impl::kGatherBlocksPerSm)
    dx_block_kernel(PoolPlan pool, const T* __restrict__ pool_dy, const uint8_t* __restrict__ positions,
                    const T* __restrict__ x, impl::DxCoefficients co, T* __restrict__ dx) {
  const int64_t first = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  pool_impl::dx_block_thread<T, VEC>(pool, first, static_cast<int64_t>(gridDim.x) * blockDim.x, pool_dy, positions, x,
                                     co, dx);
}

bool misaligned(const void* p) {
  return p != nullptr && reinterpret_cast<uintptr_t>(p) % cuda::launch::kVectorBytes != 0;
}

void check_plan(const Plan& p, int elem_bytes, std::initializer_list<const void*> pointers) {
  if (p.rows < 1 || p.channels < 1) throw std::invalid_argument("batch_norm kernels: empty tensor");
  if (p.vec != 1 && p.vec != cuda::launch::kVectorBytes / elem_bytes) throw std::invalid_argument("batch_norm kernels: plan of another dtype");
  if (p.vec > 1) {
    for (const void* ptr : pointers) {
      if (misaligned(ptr))
        throw std::invalid_argument("batch_norm kernels: a plan with 16-byte loads got a misaligned pointer");
    }
  }
}

dim3 main_block(const Plan& p) { return dim3(p.lanes, p.row_threads); }
dim3 finalize_grid(const Plan& p) {
  return dim3(static_cast<unsigned>(impl::ceil_div(p.channels, impl::kFinalizeChannels)));
}
dim3 finalize_block() { return dim3(impl::kFinalizeChannels, impl::kFinalizeGroups); }

template <typename T, int VEC>
void forward_with(const Plan& p, const ForwardArgs<T>& a, cudaStream_t stream) {
  if (a.batch_stats) {
    float* part_sum = static_cast<float*>(a.workspace);
    float* part_sq = part_sum + static_cast<int64_t>(p.reduce_blocks) * p.channels;
    stats_kernel<T, VEC><<<dim3(p.tiles, p.reduce_blocks), main_block(p), 0, stream>>>(p, a.x, part_sum, part_sq);
    RN50_CUDA_CHECK(cudaGetLastError());
    const impl::StatsOut out{a.mean, a.invstd, a.running_mean, a.running_var, a.momentum, a.eps};
    finalize_forward_kernel<T><<<finalize_grid(p), finalize_block(), 0, stream>>>(p, part_sum, part_sq, a.x, out);
    RN50_CUDA_CHECK(cudaGetLastError());
  }
  if (a.y == nullptr) return;  // the statistics alone (checked by batch_norm_forward)
  const dim3 grid(p.tiles, p.elementwise_blocks);
  const bool residual = a.residual != nullptr;
  if (a.silu) {
    if (residual) throw std::invalid_argument("batch_norm kernels: SiLU with a residual is not implemented");
    normalize_kernel<T, VEC, false, false, true>
        <<<grid, main_block(p), 0, stream>>>(p, a.x, nullptr, a.y, a.weight, a.bias, a.mean, a.invstd, nullptr);
  } else if (residual && a.relu) {
    normalize_kernel<T, VEC, true, true>
        <<<grid, main_block(p), 0, stream>>>(p, a.x, a.residual, a.y, a.weight, a.bias, a.mean, a.invstd, a.relu_bits);
  } else if (residual) {
    normalize_kernel<T, VEC, true, false>
        <<<grid, main_block(p), 0, stream>>>(p, a.x, a.residual, a.y, a.weight, a.bias, a.mean, a.invstd, nullptr);
  } else if (a.relu) {
    normalize_kernel<T, VEC, false, true>
        <<<grid, main_block(p), 0, stream>>>(p, a.x, nullptr, a.y, a.weight, a.bias, a.mean, a.invstd, nullptr);
  } else {
    normalize_kernel<T, VEC, false, false>
        <<<grid, main_block(p), 0, stream>>>(p, a.x, nullptr, a.y, a.weight, a.bias, a.mean, a.invstd, nullptr);
  }
  RN50_CUDA_CHECK(cudaGetLastError());
}

// The reduction with ReLU, its mask from relu_bits where given (VEC 8 only: batch_norm_backward checks), else from y.
template <typename T, int VEC>
void reduce_relu(const Plan& p, const BackwardArgs<T>& a, bool store_g, dim3 grid, float* part_g, float* part_gx,
                 cudaStream_t stream) {
  T* g_out = store_g ? a.dresidual : nullptr;
  if constexpr (VEC == 8) {
    if (a.relu_bits != nullptr) {
      if (store_g) {
        backward_reduce_kernel<T, VEC, impl::ReluFrom::kBits, true>
            <<<grid, main_block(p), 0, stream>>>(p, a.dy, nullptr, a.relu_bits, a.x, a.mean, g_out, part_g, part_gx);
      } else {
        backward_reduce_kernel<T, VEC, impl::ReluFrom::kBits, false>
            <<<grid, main_block(p), 0, stream>>>(p, a.dy, nullptr, a.relu_bits, a.x, a.mean, g_out, part_g, part_gx);
      }
      return;
    }
  }
  if (store_g) {
    backward_reduce_kernel<T, VEC, impl::ReluFrom::kY, true>
        <<<grid, main_block(p), 0, stream>>>(p, a.dy, a.y, nullptr, a.x, a.mean, g_out, part_g, part_gx);
  } else {
    backward_reduce_kernel<T, VEC, impl::ReluFrom::kY, false>
        <<<grid, main_block(p), 0, stream>>>(p, a.dy, a.y, nullptr, a.x, a.mean, g_out, part_g, part_gx);
  }
}

template <typename T, int VEC>
void backward_with(const Plan& p, const BackwardArgs<T>& a, cudaStream_t stream) {
  float* part_g = static_cast<float*>(a.workspace);
  float* part_gx = part_g + static_cast<int64_t>(p.reduce_blocks) * p.channels;
  const dim3 reduce_grid(p.tiles, p.reduce_blocks);
  // With ReLU and a residual the reduction stores g as the residual's gradient, and dx reads it back instead of dy
  // and y: one tensor read fewer. Without a residual there is nothing to store g in, so dx masks dy again.
  const bool store_g = a.relu && a.dresidual != nullptr;
  if (a.silu) {
    if (a.dresidual != nullptr) throw std::invalid_argument("batch_norm kernels: SiLU with a residual is not implemented");
    backward_reduce_silu_kernel<T, VEC>
        <<<reduce_grid, main_block(p), 0, stream>>>(p, a.dy, a.x, a.mean, a.weight, a.bias, a.invstd, part_g, part_gx);
  } else if (a.relu) {
    reduce_relu<T, VEC>(p, a, store_g, reduce_grid, part_g, part_gx, stream);
  } else {
    backward_reduce_kernel<T, VEC, impl::ReluFrom::kNone, false>
        <<<reduce_grid, main_block(p), 0, stream>>>(p, a.dy, nullptr, nullptr, a.x, a.mean, nullptr, part_g, part_gx);
  }
  RN50_CUDA_CHECK(cudaGetLastError());
  finalize_backward_kernel<<<finalize_grid(p), finalize_block(), 0, stream>>>(
      p, part_g, part_gx, impl::GradOut{a.invstd, a.dweight, a.dbias});
  RN50_CUDA_CHECK(cudaGetLastError());
  const impl::DxCoefficients co{a.weight, a.mean, a.invstd, a.dweight, a.dbias, a.batch_stats, a.bias};
  const dim3 grid(p.tiles, p.elementwise_blocks);
  if (a.silu) {
    dx_kernel<T, VEC, impl::GradSource::kDySilu><<<grid, main_block(p), 0, stream>>>(p, a.dy, nullptr, a.x, co, a.dx);
  } else if (store_g) {
    dx_kernel<T, VEC, impl::GradSource::kStored>
        <<<grid, main_block(p), 0, stream>>>(p, a.dresidual, nullptr, a.x, co, a.dx);
  } else if (a.relu) {
    dx_kernel<T, VEC, impl::GradSource::kDyMasked><<<grid, main_block(p), 0, stream>>>(p, a.dy, a.y, a.x, co, a.dx);
  } else {
    dx_kernel<T, VEC, impl::GradSource::kDy><<<grid, main_block(p), 0, stream>>>(p, a.dy, nullptr, a.x, co, a.dx);
  }
  RN50_CUDA_CHECK(cudaGetLastError());
}

// The sums over the pool's outputs (`po`: pooled_reduce_plan), then dx over the inputs gathering each one's gradient.
template <typename T, int VEC, class Grad>
void backward_from_with(const Plan& p, const Plan& po, const BackwardArgs<T>& a, const PoolPlan& pool, const T* pool_dy,
                        const uint8_t* positions, const T* x_at, const Grad& grad, cudaStream_t stream) {
  float* part_g = static_cast<float*>(a.workspace);
  float* part_gx = part_g + static_cast<int64_t>(po.reduce_blocks) * po.channels;
  using Masked = pool_impl::PoolMaskedGrad<T, VEC>;
  backward_reduce_from_kernel<T, VEC, Masked><<<dim3(po.tiles, po.reduce_blocks), main_block(po), 0, stream>>>(
      po, Masked{pool_dy, positions, po.channels}, x_at, a.mean, part_g, part_gx);
  RN50_CUDA_CHECK(cudaGetLastError());
  finalize_backward_kernel<<<finalize_grid(po), finalize_block(), 0, stream>>>(
      po, part_g, part_gx, impl::GradOut{a.invstd, a.dweight, a.dbias});
  RN50_CUDA_CHECK(cudaGetLastError());
  const impl::DxCoefficients co{a.weight, a.mean, a.invstd, a.dweight, a.dbias, a.batch_stats, a.bias};
  const Plan pd = impl::pooled_dx_plan(p);
  if (pool.two_by_two) {
    dx_block_kernel<T, VEC>
        <<<pd.tiles * pd.elementwise_blocks, impl::kThreads, 0, stream>>>(pool, pool_dy, positions, a.x, co, a.dx);
  } else {
    dx_from_kernel<T, VEC, Grad>
        <<<dim3(pd.tiles, pd.elementwise_blocks), main_block(pd), 0, stream>>>(pd, grad, a.x, co, a.dx);
  }
  RN50_CUDA_CHECK(cudaGetLastError());
}

template <typename T, int VEC>
void backward_pooled_with(const Plan& p, const BackwardArgs<T>& a, const PoolPlan& pool, const T* pool_dy,
                          const uint8_t* positions, const T* x_at, cudaStream_t stream) {
  const Plan po = impl::pooled_reduce_plan(p, pool.s.n * pool.oh * pool.ow);
  if (pool.few_covers) {
    backward_from_with<T, VEC>(p, po, a, pool, pool_dy, positions, x_at,
                               pool_impl::PoolGatherGrad<T, VEC, true>{pool, pool_dy, positions}, stream);
  } else {
    backward_from_with<T, VEC>(p, po, a, pool, pool_dy, positions, x_at,
                               pool_impl::PoolGatherGrad<T, VEC, false>{pool, pool_dy, positions}, stream);
  }
}

}  // namespace

template <typename T>
Plan make_plan(int64_t rows, int64_t channels, bool aligned16, int device) {
  if (rows < 1 || channels < 1) throw std::invalid_argument("batch_norm kernels: empty tensor");
  int sm_count = 0;
  RN50_CUDA_CHECK(cudaDeviceGetAttribute(&sm_count, cudaDevAttrMultiProcessorCount, device));
  return impl::make_plan_for(rows, channels, static_cast<int>(sizeof(T)), aligned16, sm_count);
}

template <typename T>
void batch_norm_forward(const Plan& plan, const ForwardArgs<T>& args, cudaStream_t stream) {
  check_plan(plan, sizeof(T), {args.x, args.residual, args.y});
  if (args.batch_stats && args.workspace == nullptr) throw std::invalid_argument("batch_norm_forward: no workspace");
  if (args.y == nullptr && !args.batch_stats) throw std::invalid_argument("batch_norm_forward: no output and no statistics");
  if (args.relu_bits != nullptr &&
      (!args.relu || args.residual == nullptr || args.y == nullptr || sizeof(T) != 2 || plan.vec != 8)) {
    throw std::invalid_argument(
        "batch_norm_forward: relu_bits need ReLU, a residual, an output and a half or bfloat16 plan of 16-byte "
        "vectors");
  }
  constexpr int kWide = cuda::launch::kVectorBytes / sizeof(T);
  if (plan.vec == kWide) {
    forward_with<T, kWide>(plan, args, stream);
  } else {
    forward_with<T, 1>(plan, args, stream);
  }
}

template <typename T>
void batch_norm_backward(const Plan& plan, const BackwardArgs<T>& args, cudaStream_t stream) {
  check_plan(plan, sizeof(T), {args.dy, args.x, args.y, args.dx, args.dresidual});
  if (args.workspace == nullptr) throw std::invalid_argument("batch_norm_backward: no workspace");
  if (args.relu_bits != nullptr && (!args.relu || sizeof(T) != 2 || plan.vec != 8)) {
    throw std::invalid_argument(
        "batch_norm_backward: relu_bits need ReLU and a half or bfloat16 plan of 16-byte vectors");
  }
  if (args.relu && args.y == nullptr && (args.relu_bits == nullptr || args.dresidual == nullptr)) {
    throw std::invalid_argument("batch_norm_backward: ReLU without y needs relu_bits and dresidual");
  }
  constexpr int kWide = cuda::launch::kVectorBytes / sizeof(T);
  if (plan.vec == kWide) {
    backward_with<T, kWide>(plan, args, stream);
  } else {
    backward_with<T, 1>(plan, args, stream);
  }
}

template <typename T>
void batch_norm_backward_pooled(const Plan& plan, const BackwardArgs<T>& args, const PoolPlan& pool, const T* pool_dy,
                                const uint8_t* positions, const T* x_at, cudaStream_t stream) {
  check_plan(plan, sizeof(T), {args.x, args.dx, pool_dy, positions, x_at});
  if (pool_dy == nullptr || positions == nullptr || x_at == nullptr) {
    throw std::invalid_argument("batch_norm_backward_pooled: a null pool tensor");
  }
  if (args.workspace == nullptr) throw std::invalid_argument("batch_norm_backward_pooled: no workspace");
  if (args.relu || args.silu || args.dresidual != nullptr || !args.batch_stats) {
    throw std::invalid_argument("batch_norm_backward_pooled: training BatchNorm alone (no activation or residual)");
  }
  if (pool.s.n * pool.s.h * pool.s.w != plan.rows || pool.s.c != plan.channels || pool.vec != plan.vec) {
    throw std::invalid_argument("batch_norm_backward_pooled: a pool plan of another shape or vector width");
  }
  constexpr int kWide = cuda::launch::kVectorBytes / sizeof(T);
  if (plan.vec == kWide) {
    backward_pooled_with<T, kWide>(plan, args, pool, pool_dy, positions, x_at, stream);
  } else {
    backward_pooled_with<T, 1>(plan, args, pool, pool_dy, positions, x_at, stream);
  }
}

#define RN50_BN_INSTANTIATE(T)                                                                                \
  template Plan make_plan<T>(int64_t, int64_t, bool, int);                                                    \
  template void batch_norm_backward_pooled<T>(const Plan&, const BackwardArgs<T>&, const PoolPlan&, const T*, \
                                              const uint8_t*, const T*, cudaStream_t);                        \
  template void batch_norm_forward<T>(const Plan&, const ForwardArgs<T>&, cudaStream_t);                      \
  template void batch_norm_backward<T>(const Plan&, const BackwardArgs<T>&, cudaStream_t);
RN50_BN_INSTANTIATE(float)
RN50_BN_INSTANTIATE(__half)
RN50_BN_INSTANTIATE(__nv_bfloat16)
#undef RN50_BN_INSTANTIATE

}  // namespace rn50::ops::kernels
