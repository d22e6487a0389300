// ops/layer_norm_kernels.cu: rn50's row kernels for LayerNorm models: the __global__ wrappers around
// ops/layer_norm_kernels_impl.cuh, the warp reductions between its phases, and the launches.
#include <cstdint>
#include <stdexcept>
#include <string>

#include "cuda/cuda_check.h"
#include "ops/layer_norm_kernels.h"
#include "ops/layer_norm_kernels_impl.cuh"

namespace rn50::ops::kernels {
namespace {

using rows::kRowsPerBlock;
using rows::kThreads;
using rows::kWarp;

__device__ inline float warp_sum(float v) {
#pragma unroll
  for (int offset = kWarp / 2; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

// The rows of warp `warp` of this block: the same for every lane, so the shuffles inside the loop see a whole warp.
__device__ inline int64_t first_row() { return static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / kWarp; }
__device__ inline int64_t row_step() { return static_cast<int64_t>(gridDim.x) * kRowsPerBlock; }

template <typename X, typename B, typename Y, int V>
__global__ void __launch_bounds__(kThreads)
    layer_norm_forward_kernel(RowPlan p, LayerNormForwardArgs<X, B, Y> a) {
  const int lane = threadIdx.x % kWarp;
  const float inv_width = 1.0f / static_cast<float>(p.width);
  for (int64_t row = first_row(); row < p.rows; row += row_step()) {
    rows::Lane<V> s;
    const float total = a.branch != nullptr ? rows::ln_load<X, B, V, true>(p, lane, row, a.x, a.branch, s)
                                            : rows::ln_load<X, B, V, false>(p, lane, row, a.x, a.branch, s);
    const float mean = warp_sum(total) * inv_width;
    const float rstd = rows::ln_rstd(warp_sum(rows::ln_square<V>(p, s, mean)), p.width, a.eps);
    if (lane == 0) {
      a.mean[row] = mean;
      a.rstd[row] = rstd;
    }
    if (a.branch != nullptr) {
      rows::ln_store<X, Y, V, true>(p, lane, row, s, mean, rstd, a.weight, a.bias, a.sum, a.y);
    } else {
      rows::ln_store<X, Y, V, false>(p, lane, row, s, mean, rstd, a.weight, a.bias, a.sum, a.y);
    }
  }
}

// After the block's rows: its warps' column sums (shared memory [kRowsPerBlock][width] from `columns`) to its partial.
__device__ inline void block_columns(const RowPlan& p, const float* columns, float* part) {
  rows::shared_to_partial(p, threadIdx.x, kThreads, blockIdx.x, columns, part);
}

template <typename X, typename B, typename Y, int V, bool kDsum, bool kBranch>
__device__ inline void layer_norm_backward_rows(const RowPlan& p, const LayerNormBackwardArgs<X, B, Y>& a,
                                                float* dweight, float* dbias) {
  const int lane = threadIdx.x % kWarp;
  const float inv_width = 1.0f / static_cast<float>(p.width);
  for (int64_t row = first_row(); row < p.rows; row += row_step()) {
    rows::Lane<V> g, xhat;
    float sum_g, sum_gx;
    const float rstd = a.rstd[row];
    rows::lnb_load<X, Y, V>(p, lane, row, a.dy, a.s, a.weight, a.mean[row], rstd, g, xhat, dweight, dbias, sum_g,
                            sum_gx);
    const float mean_g = warp_sum(sum_g) * inv_width, mean_gx = warp_sum(sum_gx) * inv_width;
    rows::lnb_store<X, B, V, kDsum, kBranch>(p, lane, row, g, xhat, mean_g, mean_gx, rstd, a.dsum, a.dx, a.dbranch);
  }
}

template <typename X, typename B, typename Y, int V>
__global__ void __launch_bounds__(kThreads)
    layer_norm_backward_kernel(RowPlan p, LayerNormBackwardArgs<X, B, Y> a, float* part_w, float* part_b) {
  extern __shared__ float smem[];  // dweight's, then dbias's column sums: [kRowsPerBlock][width] each
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  float* dweight = smem + static_cast<int64_t>(warp) * p.width;
  float* dbias = smem + (static_cast<int64_t>(kRowsPerBlock) + warp) * p.width;
  rows::zero_columns<V>(p, lane, dweight);
  rows::zero_columns<V>(p, lane, dbias);
  const bool dsum = a.dsum != nullptr, branch = a.dbranch != nullptr;
  if (dsum && branch) {
    layer_norm_backward_rows<X, B, Y, V, true, true>(p, a, dweight, dbias);
  } else if (dsum) {
    layer_norm_backward_rows<X, B, Y, V, true, false>(p, a, dweight, dbias);
  } else if (branch) {
    layer_norm_backward_rows<X, B, Y, V, false, true>(p, a, dweight, dbias);
  } else {
    layer_norm_backward_rows<X, B, Y, V, false, false>(p, a, dweight, dbias);
  }
  __syncthreads();
  block_columns(p, smem, part_w);
  block_columns(p, smem + static_cast<int64_t>(kRowsPerBlock) * p.width, part_b);
}

__global__ void __launch_bounds__(rows::kFinalizeThreads)
    finalize_columns_kernel(RowPlan p, const float* part_a, const float* part_b, float* out_a, float* out_b) {
  const int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= p.width) return;
  out_a[c] = rows::finalize_column(p, c, part_a);
  if (out_b != nullptr) out_b[c] = rows::finalize_column(p, c, part_b);
}

template <typename X, typename Y, int V>
__global__ void __launch_bounds__(kThreads)
    scaled_residual_forward_kernel(RowPlan p, ScaledResidualForwardArgs<X, Y> a) {
  const int lane = threadIdx.x % kWarp;
  for (int64_t row = first_row(); row < p.rows; row += row_step()) {
    if (a.scale != nullptr) {
      rows::sr_forward_row<X, Y, V, true>(p, lane, row, a.x, a.y, a.gamma, a.scale, a.rows_per_sample, a.out);
    } else {
      rows::sr_forward_row<X, Y, V, false>(p, lane, row, a.x, a.y, a.gamma, a.scale, a.rows_per_sample, a.out);
    }
  }
}

template <typename X, typename Y, int V>
__global__ void __launch_bounds__(kThreads)
    scaled_residual_backward_kernel(RowPlan p, ScaledResidualBackwardArgs<X, Y> a, float* part) {
  extern __shared__ float smem[];  // [kRowsPerBlock][width] column sums
  const int lane = threadIdx.x % kWarp;
  float* dgamma = smem + static_cast<int64_t>(threadIdx.x / kWarp) * p.width;
  rows::zero_columns<V>(p, lane, dgamma);
  for (int64_t row = first_row(); row < p.rows; row += row_step()) {
    if (a.scale != nullptr) {
      rows::sr_backward_row<X, Y, V, true>(p, lane, row, a.dout, a.y, a.gamma, a.scale, a.rows_per_sample, a.dy,
                                           dgamma);
    } else {
      rows::sr_backward_row<X, Y, V, false>(p, lane, row, a.dout, a.y, a.gamma, a.scale, a.rows_per_sample, a.dy,
                                            dgamma);
    }
  }
  __syncthreads();
  block_columns(p, smem, part);
}

int sm_count_of_current_device() {
  int device = 0, sms = 0;
  RN50_CUDA_CHECK(cudaGetDevice(&device));
  RN50_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  return sms;
}

void check_plan(const RowPlan& p, const char* what, std::initializer_list<const void*> pointers) {
  if (!p.supported) throw std::invalid_argument(std::string(what) + ": a plan for an unsupported width");
  for (const void* ptr : pointers) {
    // Each tensor's vectors are V elements; 16-byte alignment of every pointer covers every V the plan picks.
    if (ptr != nullptr && reinterpret_cast<uintptr_t>(ptr) % 16 != 0 && p.vec > 1) {
      throw std::invalid_argument(std::string(what) + ": a vector plan got a pointer that is not 16-byte aligned");
    }
  }
}

// Shared memory of a backward block: `sums` column sums of each warp.
size_t shared_bytes(const RowPlan& p, int sums) {
  return static_cast<size_t>(sums) * kRowsPerBlock * static_cast<size_t>(p.width) * sizeof(float);
}

// Past 48 KiB a kernel must ask for its dynamic shared memory (a width of 1024 needs 64 KiB).
template <typename Kernel>
void allow_shared(Kernel kernel, size_t bytes) {
  RN50_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)));
}

void finalize(const RowPlan& p, const float* part_a, const float* part_b, float* out_a, float* out_b,
              cudaStream_t stream) {
  const unsigned blocks = static_cast<unsigned>((p.width + rows::kFinalizeThreads - 1) / rows::kFinalizeThreads);
  finalize_columns_kernel<<<blocks, rows::kFinalizeThreads, 0, stream>>>(p, part_a, part_b, out_a, out_b);
  RN50_CUDA_CHECK(cudaGetLastError());
}

// Calls f with the plan's vector width as a compile-time constant.
template <typename F>
void with_vec(const RowPlan& p, F&& f) {
  switch (p.vec) {
    case 8:
      f(std::integral_constant<int, 8>{});
      break;
    case 4:
      f(std::integral_constant<int, 4>{});
      break;
    case 2:
      f(std::integral_constant<int, 2>{});
      break;
    default:
      f(std::integral_constant<int, 1>{});
  }
}

}  // namespace

RowPlan make_row_plan(int64_t rows, int64_t width, int max_vec, int device) {
  int sms = 0;
  RN50_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  return rows::make_row_plan_for(rows, width, max_vec, sms);
}

template <typename X, typename B, typename Y>
void layer_norm_forward(const RowPlan& p, const LayerNormForwardArgs<X, B, Y>& a, cudaStream_t stream) {
  check_plan(p, "layer_norm_forward", {a.x, a.branch, a.sum, a.y});
  if (a.branch != nullptr && a.sum == nullptr) throw std::invalid_argument("layer_norm_forward: a branch and no sum");
  const int blocks = rows::forward_blocks(p, sm_count_of_current_device());
  with_vec(p, [&](auto v) {
    layer_norm_forward_kernel<X, B, Y, decltype(v)::value><<<blocks, kThreads, 0, stream>>>(p, a);
  });
  RN50_CUDA_CHECK(cudaGetLastError());
}

template <typename X, typename B, typename Y>
void layer_norm_backward(const RowPlan& p, const LayerNormBackwardArgs<X, B, Y>& a, cudaStream_t stream) {
  check_plan(p, "layer_norm_backward", {a.dy, a.s, a.dsum, a.dx, a.dbranch});
  if (a.workspace == nullptr) throw std::invalid_argument("layer_norm_backward: no workspace");
  float* part_w = static_cast<float*>(a.workspace);
  float* part_b = part_w + static_cast<int64_t>(p.blocks) * p.width;
  with_vec(p, [&](auto v) {
    auto kernel = layer_norm_backward_kernel<X, B, Y, decltype(v)::value>;
    allow_shared(kernel, shared_bytes(p, 2));
    kernel<<<p.blocks, kThreads, shared_bytes(p, 2), stream>>>(p, a, part_w, part_b);
  });
  RN50_CUDA_CHECK(cudaGetLastError());
  finalize(p, part_w, part_b, a.dweight, a.dbias, stream);
}

template <typename X, typename Y>
void scaled_residual_forward(const RowPlan& p, const ScaledResidualForwardArgs<X, Y>& a, cudaStream_t stream) {
  check_plan(p, "scaled_residual_forward", {a.x, a.y, a.out});
  if (a.rows_per_sample < 1) throw std::invalid_argument("scaled_residual_forward: rows_per_sample < 1");
  const int blocks = rows::forward_blocks(p, sm_count_of_current_device());
  with_vec(p, [&](auto v) {
    scaled_residual_forward_kernel<X, Y, decltype(v)::value><<<blocks, kThreads, 0, stream>>>(p, a);
  });
  RN50_CUDA_CHECK(cudaGetLastError());
}

template <typename X, typename Y>
void scaled_residual_backward(const RowPlan& p, const ScaledResidualBackwardArgs<X, Y>& a, cudaStream_t stream) {
  check_plan(p, "scaled_residual_backward", {a.dout, a.y, a.dy});
  if (a.workspace == nullptr) throw std::invalid_argument("scaled_residual_backward: no workspace");
  if (a.rows_per_sample < 1) throw std::invalid_argument("scaled_residual_backward: rows_per_sample < 1");
  float* part = static_cast<float*>(a.workspace);
  with_vec(p, [&](auto v) {
    auto kernel = scaled_residual_backward_kernel<X, Y, decltype(v)::value>;
    allow_shared(kernel, shared_bytes(p, 1));
    kernel<<<p.blocks, kThreads, shared_bytes(p, 1), stream>>>(p, a, part);
  });
  RN50_CUDA_CHECK(cudaGetLastError());
  finalize(p, part, nullptr, a.dgamma, nullptr, stream);
}

// The dtype triples the models use: the residual stream (X), the branch added to it (B) and LayerNorm's output (Y).
#define RN50_LN_INSTANTIATE(X, B, Y)                                                                            \
  template void layer_norm_forward<X, B, Y>(const RowPlan&, const LayerNormForwardArgs<X, B, Y>&, cudaStream_t); \
  template void layer_norm_backward<X, B, Y>(const RowPlan&, const LayerNormBackwardArgs<X, B, Y>&, cudaStream_t);
RN50_LN_INSTANTIATE(float, float, float)
RN50_LN_INSTANTIATE(float, __half, __half)
RN50_LN_INSTANTIATE(float, __nv_bfloat16, __nv_bfloat16)
RN50_LN_INSTANTIATE(float, float, __half)
RN50_LN_INSTANTIATE(float, float, __nv_bfloat16)
RN50_LN_INSTANTIATE(__half, __half, __half)
RN50_LN_INSTANTIATE(__nv_bfloat16, __nv_bfloat16, __nv_bfloat16)
RN50_LN_INSTANTIATE(__half, __half, float)
RN50_LN_INSTANTIATE(__nv_bfloat16, __nv_bfloat16, float)
#undef RN50_LN_INSTANTIATE

#define RN50_SR_INSTANTIATE(X, Y)                                                                                    \
  template void scaled_residual_forward<X, Y>(const RowPlan&, const ScaledResidualForwardArgs<X, Y>&, cudaStream_t); \
  template void scaled_residual_backward<X, Y>(const RowPlan&, const ScaledResidualBackwardArgs<X, Y>&, cudaStream_t);
RN50_SR_INSTANTIATE(float, float)
RN50_SR_INSTANTIATE(float, __half)
RN50_SR_INSTANTIATE(float, __nv_bfloat16)
#undef RN50_SR_INSTANTIATE

}  // namespace rn50::ops::kernels
