// ops/max_pool_kernels.cu: rn50's channels-last max-pool kernels: the __global__ wrappers around
// ops/max_pool_kernels_impl.cuh and their launches.
#include <cstdint>
#include <stdexcept>
#include <string>

#include "cuda/cuda_check.h"
#include "cuda/launch.h"
#include "ops/max_pool_kernels.h"
#include "ops/max_pool_kernels_impl.cuh"

namespace rn50::ops::kernels {
namespace {

__device__ inline int64_t first_item() { return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; }
__device__ inline int64_t grid_step() { return static_cast<int64_t>(gridDim.x) * blockDim.x; }

// The forward is issue-bound (its 3x3 windows normalised element by element): 3 resident blocks an SM instead of the
// 2 its 87 registers allowed give the schedulers more warps; ptxas then uses at most 80 (of 85) without spilling, and
// the fused stem's forward and backward took 0.867 against 0.894 ms at batch 256 on an H100 (2026-12-07).
constexpr int kForwardBlocksPerSm = 3;

template <typename T, int VEC, bool kSmall, bool kNorm>
__global__ void __launch_bounds__(cuda::launch::kThreads, kForwardBlocksPerSm)
    max_pool_forward_kernel(PoolPlan p, const T* __restrict__ x, T* __restrict__ y, uint8_t* __restrict__ positions,
                            PoolNorm norm, T* __restrict__ x_at) {
  pool_impl::forward_thread<T, VEC, kSmall, kNorm>(p, first_item(), grid_step(), x, y, positions, norm, x_at);
}

template <typename T, int VEC, bool kFew, bool kEager>
__global__ void __launch_bounds__(cuda::launch::kThreads)
    max_pool_backward_kernel(PoolPlan p, const T* __restrict__ dy, const uint8_t* __restrict__ positions,
                             T* __restrict__ dx) {
  pool_impl::backward_thread<T, VEC, kFew, kEager>(p, first_item(), grid_step(), dy, positions, dx);
}

template <typename T, int VEC>
__global__ void __launch_bounds__(cuda::launch::kThreads)
    max_pool_backward_block_kernel(PoolPlan p, const T* __restrict__ dy, const uint8_t* __restrict__ positions,
                                   T* __restrict__ dx) {
  pool_impl::backward_block_thread<T, VEC>(p, first_item(), grid_step(), dy, positions, dx);
}

bool misaligned(const void* p) { return reinterpret_cast<uintptr_t>(p) % cuda::launch::kVectorBytes != 0; }

// A plan made for another element type, or vector loads on pointers that do not allow them, would read wrong memory.
void check_plan(const PoolPlan& p, int elem_bytes, std::initializer_list<const void*> pointers) {
  if (p.forward_items < 1 || p.backward_items < 1) throw std::invalid_argument("max_pool kernels: an empty plan");
  if (p.vec != 1 && p.vec != cuda::launch::kVectorBytes / elem_bytes) {
    throw std::invalid_argument("max_pool kernels: a plan of another dtype");
  }
  for (const void* ptr : pointers) {
    if (ptr == nullptr) throw std::invalid_argument("max_pool kernels: a null pointer");
    if (p.vec > 1 && misaligned(ptr)) {
      throw std::invalid_argument("max_pool kernels: a plan with 16-byte loads got a misaligned pointer");
    }
  }
}

template <typename T, int VEC, bool kNorm>
void forward_with(const PoolPlan& p, const T* x, T* y, uint8_t* positions, const PoolNorm& norm, T* x_at,
                  cudaStream_t stream) {
  if (p.small_window) {
    max_pool_forward_kernel<T, VEC, true, kNorm>
        <<<p.forward_blocks, cuda::launch::kThreads, 0, stream>>>(p, x, y, positions, norm, x_at);
  } else {
    max_pool_forward_kernel<T, VEC, false, kNorm>
        <<<p.forward_blocks, cuda::launch::kThreads, 0, stream>>>(p, x, y, positions, norm, x_at);
  }
  RN50_CUDA_CHECK(cudaGetLastError());
}

template <typename T, int VEC>
void backward_with(const PoolPlan& p, const T* dy, const uint8_t* positions, T* dx, cudaStream_t stream) {
  if (p.two_by_two) {
    max_pool_backward_block_kernel<T, VEC>
        <<<p.forward_blocks, cuda::launch::kThreads, 0, stream>>>(p, dy, positions, dx);
  } else if (p.few_covers && p.gradients_with_positions) {
    max_pool_backward_kernel<T, VEC, true, true>
        <<<p.backward_blocks, cuda::launch::kThreads, 0, stream>>>(p, dy, positions, dx);
  } else if (p.few_covers) {
    max_pool_backward_kernel<T, VEC, true, false>
        <<<p.backward_blocks, cuda::launch::kThreads, 0, stream>>>(p, dy, positions, dx);
  } else {
    max_pool_backward_kernel<T, VEC, false, false>
        <<<p.backward_blocks, cuda::launch::kThreads, 0, stream>>>(p, dy, positions, dx);
  }
  RN50_CUDA_CHECK(cudaGetLastError());
}

}  // namespace

template <typename T>
void max_pool_forward(const PoolPlan& plan, const T* x, T* y, uint8_t* positions, cudaStream_t stream) {
  check_plan(plan, sizeof(T), {x, y, positions});
  constexpr int kWide = cuda::launch::kVectorBytes / sizeof(T);
  if (plan.vec == kWide) {
    forward_with<T, kWide, false>(plan, x, y, positions, PoolNorm{}, nullptr, stream);
  } else {
    forward_with<T, 1, false>(plan, x, y, positions, PoolNorm{}, nullptr, stream);
  }
}

template <typename T>
void bn_relu_max_pool_forward(const PoolPlan& plan, const T* x, const PoolNorm& norm, T* y, uint8_t* positions, T* x_at,
                              cudaStream_t stream) {
  check_plan(plan, sizeof(T), {x, y, positions, x_at});
  if (norm.weight == nullptr || norm.bias == nullptr || norm.mean == nullptr || norm.invstd == nullptr) {
    throw std::invalid_argument("bn_relu_max_pool kernels: a null BatchNorm pointer");
  }
  if (plan.s.kh * plan.s.kw > kNoGradient) {
    throw std::invalid_argument("bn_relu_max_pool kernels: a window of more than 255 elements");
  }
  constexpr int kWide = cuda::launch::kVectorBytes / sizeof(T);
  if (plan.vec == kWide) {
    forward_with<T, kWide, true>(plan, x, y, positions, norm, x_at, stream);
  } else {
    forward_with<T, 1, true>(plan, x, y, positions, norm, x_at, stream);
  }
}

template <typename T>
void max_pool_backward(const PoolPlan& plan, const T* dy, const uint8_t* positions, T* dx, cudaStream_t stream) {
  check_plan(plan, sizeof(T), {dy, positions, dx});
  constexpr int kWide = cuda::launch::kVectorBytes / sizeof(T);
  if (plan.vec == kWide) {
    backward_with<T, kWide>(plan, dy, positions, dx, stream);
  } else {
    backward_with<T, 1>(plan, dy, positions, dx, stream);
  }
}

#define RN50_MAX_POOL_INSTANTIATE(T)                                                                      \
  template void max_pool_forward<T>(const PoolPlan&, const T*, T*, uint8_t*, cudaStream_t);               \
  template void bn_relu_max_pool_forward<T>(const PoolPlan&, const T*, const PoolNorm&, T*, uint8_t*, T*, \
                                            cudaStream_t);                                                \
  template void max_pool_backward<T>(const PoolPlan&, const T*, const uint8_t*, T*, cudaStream_t);
RN50_MAX_POOL_INSTANTIATE(float)
RN50_MAX_POOL_INSTANTIATE(__half)
RN50_MAX_POOL_INSTANTIATE(__nv_bfloat16)
#undef RN50_MAX_POOL_INSTANTIATE

}  // namespace rn50::ops::kernels
