// cuda/kernels.cu: rn50's own CUDA kernels: input normalisation and the fused SGD update.
#include <algorithm>
#include <string>

#include "cuda/cuda_check.h"
#include "cuda/device_convert.cuh"
#include "cuda/kernels.h"
#include "cuda/launch.h"

namespace rn50::cuda::kernels {
namespace {

// One thread per pixel: three bytes in, three values out.
template <typename T>
__global__ void normalize_kernel(const uint8_t* __restrict__ in, T* __restrict__ out, int64_t pixels, int64_t plane,
                                 bool channels_last, Affine affine) {
  for (int64_t p = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; p < pixels; p += int64_t(gridDim.x) * blockDim.x) {
    const uint8_t* px = in + 3 * p;
    if (channels_last) {
#pragma unroll
      for (int c = 0; c < 3; ++c) out[3 * p + c] = to_out<T>(px[c] * affine.scale[c] - affine.shift[c]);
    } else {
      const int64_t image = p / plane, offset = p % plane;
#pragma unroll
      for (int c = 0; c < 3; ++c) {
        out[(image * 3 + c) * plane + offset] = to_out<T>(px[c] * affine.scale[c] - affine.shift[c]);
      }
    }
  }
}

__global__ void fused_sgd_kernel(const SgdSlice* __restrict__ slices, const int32_t* __restrict__ chunk_tensor,
                                 const int64_t* __restrict__ chunk_begin, int64_t chunk_size, float momentum,
                                 const float* __restrict__ neg_lr, const float* __restrict__ found_inf) {
  if (found_inf != nullptr && *found_inf != 0.0f) return;  // an overflowed fp16 step is skipped whole
  const SgdSlice s = slices[chunk_tensor[blockIdx.x]];
  const int64_t begin = chunk_begin[blockIdx.x];
  const int64_t end = begin + chunk_size < s.size ? begin + chunk_size : s.size;
  const float lr = *neg_lr;
  for (int64_t i = begin + threadIdx.x; i < end; i += blockDim.x) {
    const float p = s.param[i];
    const float b = momentum * s.momentum[i] + s.grad[i] + s.weight_decay * p;
    s.momentum[i] = b;
    s.param[i] = p + lr * b;
  }
}

}  // namespace

void normalize_images(const uint8_t* in, void* out, OutType type, int64_t images, int64_t height, int64_t width,
                      bool channels_last, const float scale[3], const float shift[3], cudaStream_t stream) {
  Affine affine{};
  for (int c = 0; c < 3; ++c) {
    affine.scale[c] = scale[c];
    affine.shift[c] = shift[c];
  }
  const int64_t pixels = images * height * width;
  const int threads = launch::kThreads;
  const int blocks = launch::blocks_for(pixels);
  switch (type) {
    case OutType::F32:
      normalize_kernel<<<blocks, threads, 0, stream>>>(in, static_cast<float*>(out), pixels, height * width,
                                                       channels_last, affine);
      break;
    case OutType::F16:
      normalize_kernel<<<blocks, threads, 0, stream>>>(in, static_cast<__half*>(out), pixels, height * width,
                                                       channels_last, affine);
      break;
    case OutType::BF16:
      normalize_kernel<<<blocks, threads, 0, stream>>>(in, static_cast<__nv_bfloat16*>(out), pixels, height * width,
                                                       channels_last, affine);
      break;
  }
  RN50_CUDA_CHECK(cudaGetLastError());
}

void fused_sgd(const SgdSlice* slices, const int32_t* chunk_tensor, const int64_t* chunk_begin, int64_t num_chunks,
               int64_t chunk_size, float momentum, const float* neg_lr, const float* found_inf, cudaStream_t stream) {
  if (num_chunks == 0) return;
  fused_sgd_kernel<<<static_cast<unsigned>(num_chunks), launch::kThreads, 0, stream>>>(
      slices, chunk_tensor, chunk_begin, chunk_size, momentum, neg_lr, found_inf);
  RN50_CUDA_CHECK(cudaGetLastError());
}

std::string describe_build(int device) {
  cudaFuncAttributes attributes{};
  RN50_CUDA_CHECK(cudaFuncGetAttributes(&attributes, fused_sgd_kernel));
  cudaDeviceProp prop{};
  RN50_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  const int device_arch = prop.major * 10 + prop.minor;
  // RN50_SASS_ARCHS lists the machine-code targets the build embedded; anything else the driver ran
  // from PTX, compiling it when the program started.
  const std::string built = RN50_SASS_ARCHS;
  const std::string mine = std::to_string(device_arch);
  bool native = false;
  for (size_t start = 0; start <= built.size();) {
    const size_t end = std::min(built.find(';', start), built.size());
    if (built.substr(start, end - start) == mine) native = true;
    start = end + 1;
  }
  return "device sm_" + mine + "; rn50's kernels built for SASS [" + (built.empty() ? "none" : built) + "] + PTX [" +
         RN50_PTX_ARCHS +
         "]: " + (native ? "running native sm_" + mine + " code" : "running PTX compiled by the driver at start") +
         " (cudaFuncGetAttributes: binaryVersion " + std::to_string(attributes.binaryVersion) + ", ptxVersion " +
         std::to_string(attributes.ptxVersion) + ")";
}

}  // namespace rn50::cuda::kernels
