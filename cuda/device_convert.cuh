// cuda/device_convert.cuh: what rn50's input kernels share: the per-channel affine of the normalisation and the
// conversion of a float to the training dtype.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace rn50::cuda::kernels {

// x * scale[c] - shift[c]: ImageNet normalisation of whole levels, passed to kernels by value.
struct Affine {
  float scale[3];
  float shift[3];
};

template <typename T>
__device__ T to_out(float x);
template <>
__device__ inline float to_out<float>(float x) {
  return x;
}
template <>
__device__ inline __half to_out<__half>(float x) {
  return __float2half_rn(x);
}
template <>
__device__ inline __nv_bfloat16 to_out<__nv_bfloat16>(float x) {
  return __float2bfloat16_rn(x);
}

}  // namespace rn50::cuda::kernels
