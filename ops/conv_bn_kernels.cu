// ops/conv_bn_kernels.cu: finalize, apply and input-gradient kernels around the fused convolutions: one thread a
// channel for the finalize; elementwise passes of 8 elements (16 bytes) a thread where C allows.
#include "ops/conv_bn_kernels.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdint>
#include <stdexcept>

#include "cuda/cuda_check.h"
#include "cuda/device_convert.cuh"
#include "cuda/launch.h"
#include "ops/batch_norm_kernels_impl.cuh"

namespace rn50::ops::kernels {
namespace {

namespace launch = rn50::cuda::launch;
constexpr int kFinalizeThreads = 128;  // the finalize kernel: one thread a channel

__global__ void finalize_kernel(FinalizeArgs a) {
  const int64_t c = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (c >= a.channels) return;
  if (c == 0 && a.num_batches_tracked != nullptr) *a.num_batches_tracked += 1;
  const double n = static_cast<double>(a.count);
  const double mean = static_cast<double>(a.sum[c]) / n;
  // E[x^2] - E[x]^2 from float sums: the cancellation costs about (mean / std)^2 float roundings, small while a
  // channel's mean stays well below a hundred of its standard deviations (the tests compare with float64); clamped
  // so that rounding cannot make it negative.
  const double var = fmax(static_cast<double>(a.sq_sum[c]) / n - mean * mean, 0.0);
  const double invstd = 1.0 / sqrt(var + a.eps);
  const double scale = static_cast<double>(a.weight[c]) * invstd;
  a.mean[c] = static_cast<float>(mean);
  a.invstd[c] = static_cast<float>(invstd);
  a.scale[c] = static_cast<float>(scale);
  a.shift[c] = static_cast<float>(static_cast<double>(a.bias[c]) - mean * scale);
  if (a.running_mean != nullptr) {
    const double unbiased = a.count > 1 ? var * n / (n - 1.0) : var;
    a.running_mean[c] = static_cast<float>((1.0 - a.momentum) * a.running_mean[c] + a.momentum * mean);
    a.running_var[c] = static_cast<float>((1.0 - a.momentum) * a.running_var[c] + a.momentum * unbiased);
  }
}

__device__ inline float to_float(__half v) { return __half2float(v); }
__device__ inline float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }
using cuda::kernels::to_out;

// VEC elements of T through one load: 16 bytes for VEC 8, one element for VEC 1.
template <typename T, int VEC>
struct alignas(sizeof(T) * VEC) Pack {
  T v[VEC];
};

// Both elementwise kernels run a 2-D grid: x across a row's channel packs (each thread keeps its channels' parameters
// in registers), y across rows, so that no thread divides an index by C.
struct Grid {
  dim3 blocks, threads;
};

Grid grid_for(int64_t rows, int64_t packs_per_row) {
  const int lanes = static_cast<int>(std::min<int64_t>(packs_per_row, launch::kWarp));
  const int row_threads = launch::kThreads / lanes;
  const auto x_blocks = static_cast<unsigned>((packs_per_row + lanes - 1) / lanes);
  // Enough blocks to fill an H200 in all; the row loop covers the rest.
  const int64_t want_y =
      std::max<int64_t>(1, launch::kFillSms * launch::kFillBlocksPerSm / static_cast<int64_t>(x_blocks));
  const auto y_blocks = static_cast<unsigned>(std::min<int64_t>((rows + row_threads - 1) / row_threads, want_y));
  return {dim3(x_blocks, std::max(1U, y_blocks)),
          dim3(static_cast<unsigned>(lanes), static_cast<unsigned>(row_threads))};
}

template <typename T, int VEC>
__global__ void __launch_bounds__(launch::kThreads) apply_kernel(ApplyArgs a) {
  const int64_t packs_per_row = a.channels / VEC;
  const int64_t p = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (p >= packs_per_row) return;
  float scale[VEC], shift[VEC], rscale[VEC], rshift[VEC];
#pragma unroll
  for (int k = 0; k < VEC; ++k) {
    const int64_t c = p * VEC + k;
    scale[k] = a.scale[c];
    shift[k] = a.shift[c];
    rscale[k] = a.rscale != nullptr ? a.rscale[c] : 1.0F;
    rshift[k] = a.rscale != nullptr ? a.rshift[c] : 0.0F;
  }
  const auto* x = static_cast<const Pack<T, VEC>*>(a.x);
  const auto* r = static_cast<const Pack<T, VEC>*>(a.residual);
  auto* out = static_cast<Pack<T, VEC>*>(a.out);
  for (int64_t row = blockIdx.y * static_cast<int64_t>(blockDim.y) + threadIdx.y; row < a.rows;
       row += static_cast<int64_t>(gridDim.y) * blockDim.y) {
    const int64_t i = row * packs_per_row + p;
    const Pack<T, VEC> xv = x[i];
    Pack<T, VEC> rv{};
    if (r != nullptr) rv = r[i];
    Pack<T, VEC> o;
#pragma unroll
    for (int k = 0; k < VEC; ++k) {
      float v = to_float(xv.v[k]) * scale[k] + shift[k];
      if (r != nullptr) v += to_float(rv.v[k]) * rscale[k] + rshift[k];
      if (a.relu) v = fmaxf(v, 0.0F);
      o.v[k] = to_out<T>(v);
    }
    out[i] = o;
    if constexpr (VEC == 8) {
      // The layout and the mask of the BatchNorm kernels' relu_bits, which their backward reads (the same 16 bytes).
      if (a.relu_bits != nullptr) {
        a.relu_bits[impl::relu_bits_index(row, a.channels, p * VEC)] =
            impl::relu_bits_of(impl::bit_cast<impl::Pack<T, 8>>(o));
      }
    }
  }
}

template <typename T, int VEC>
__global__ void __launch_bounds__(launch::kThreads) dbn_apply_kernel(DbnApplyArgs a) {
  const int64_t packs_per_row = a.channels / VEC;
  const int64_t p = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (p >= packs_per_row) return;
  float eq_dy[VEC], eq_x[VEC], eq_bias[VEC];
#pragma unroll
  for (int k = 0; k < VEC; ++k) {
    const int64_t c = p * VEC + k;
    eq_dy[k] = a.eq_dy[c];
    eq_x[k] = a.eq_x[c];
    eq_bias[k] = a.eq_bias[c];
  }
  const auto* dz = static_cast<const Pack<T, VEC>*>(a.dz);
  const auto* x = static_cast<const Pack<T, VEC>*>(a.x);
  auto* dx = static_cast<Pack<T, VEC>*>(a.dx);
  for (int64_t row = blockIdx.y * static_cast<int64_t>(blockDim.y) + threadIdx.y; row < a.rows;
       row += static_cast<int64_t>(gridDim.y) * blockDim.y) {
    const int64_t i = row * packs_per_row + p;
    const Pack<T, VEC> zv = dz[i], xv = x[i];
    Pack<T, VEC> o;
#pragma unroll
    for (int k = 0; k < VEC; ++k) {
      o.v[k] = to_out<T>(eq_dy[k] * to_float(zv.v[k]) + eq_x[k] * to_float(xv.v[k]) + eq_bias[k]);
    }
    dx[i] = o;
  }
}

bool aligned16(const void* p) {
  return p == nullptr || reinterpret_cast<uintptr_t>(p) % launch::kVectorBytes == 0;
}

template <typename T, int VEC>
void launch_apply_vec(const ApplyArgs& a, cudaStream_t stream) {
  const Grid g = grid_for(a.rows, a.channels / VEC);
  apply_kernel<T, VEC><<<g.blocks, g.threads, 0, stream>>>(a);
}

template <typename T>
void launch_apply(const ApplyArgs& a, cudaStream_t stream) {
  constexpr int kWide = launch::kVectorBytes / sizeof(T);
  if (a.channels % kWide == 0 && aligned16(a.x) && aligned16(a.residual) && aligned16(a.out)) {
    launch_apply_vec<T, kWide>(a, stream);
  } else if (a.relu_bits != nullptr) {
    throw std::invalid_argument("bn_apply: relu_bits need channels a multiple of 8 and 16-byte aligned tensors");
  } else {
    launch_apply_vec<T, 1>(a, stream);
  }
}

template <typename T, int VEC>
void launch_dbn_apply_vec(const DbnApplyArgs& a, cudaStream_t stream) {
  const Grid g = grid_for(a.rows, a.channels / VEC);
  dbn_apply_kernel<T, VEC><<<g.blocks, g.threads, 0, stream>>>(a);
}

template <typename T>
void launch_dbn_apply(const DbnApplyArgs& a, cudaStream_t stream) {
  constexpr int kWide = launch::kVectorBytes / sizeof(T);
  if (a.channels % kWide == 0 && aligned16(a.dz) && aligned16(a.x) && aligned16(a.dx)) {
    launch_dbn_apply_vec<T, kWide>(a, stream);
  } else {
    launch_dbn_apply_vec<T, 1>(a, stream);
  }
}

}  // namespace

void bn_finalize(const FinalizeArgs& args, cudaStream_t stream) {
  if (args.channels <= 0 || args.count <= 0) throw std::invalid_argument("bn_finalize: no channels or no values");
  const int threads = kFinalizeThreads;
  const auto blocks = static_cast<unsigned>((args.channels + threads - 1) / threads);
  finalize_kernel<<<blocks, threads, 0, stream>>>(args);
  RN50_CUDA_CHECK(cudaGetLastError());
}

void bn_apply(const ApplyArgs& args, cudaStream_t stream) {
  if (args.rows <= 0 || args.channels <= 0) return;
  if (args.relu_bits != nullptr && !args.relu) throw std::invalid_argument("bn_apply: relu_bits without ReLU");
  if (args.half) {
    launch_apply<__half>(args, stream);
  } else {
    launch_apply<__nv_bfloat16>(args, stream);
  }
  RN50_CUDA_CHECK(cudaGetLastError());
}

void dbn_apply(const DbnApplyArgs& args, cudaStream_t stream) {
  if (args.rows <= 0 || args.channels <= 0) return;
  if (args.half) {
    launch_dbn_apply<__half>(args, stream);
  } else {
    launch_dbn_apply<__nv_bfloat16>(args, stream);
  }
  RN50_CUDA_CHECK(cudaGetLastError());
}

}  // namespace rn50::ops::kernels
