// cuda/kernels.cu: rn50's own CUDA kernels: input normalisation and the fused SGD and AdamW updates.
#include <algorithm>
#include <string>

#include "cuda/cuda_check.h"
#include "cuda/device_convert.cuh"
#include "cuda/kernels.h"
#include "cuda/launch.h"

namespace rn50::cuda::kernels {
namespace {

// One thread per pixel: three bytes in, `channels` values out (zeros past the third).
template <typename T>
__global__ void normalize_kernel(const uint8_t* __restrict__ in, T* __restrict__ out, int64_t pixels, int64_t plane,
                                 int channels, bool channels_last, Affine affine) {
  for (int64_t p = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; p < pixels; p += int64_t(gridDim.x) * blockDim.x) {
    const uint8_t* px = in + 3 * p;
    if (channels_last) {
#pragma unroll
      for (int c = 0; c < 3; ++c) out[channels * p + c] = to_out<T>(px[c] * affine.scale[c] - affine.shift[c]);
      for (int c = 3; c < channels; ++c) out[channels * p + c] = to_out<T>(0.0f);
    } else {
      const int64_t image = p / plane, offset = p % plane;
#pragma unroll
      for (int c = 0; c < 3; ++c) {
        out[(image * channels + c) * plane + offset] = to_out<T>(px[c] * affine.scale[c] - affine.shift[c]);
      }
      for (int c = 3; c < channels; ++c) out[(image * channels + c) * plane + offset] = to_out<T>(0.0f);
    }
  }
}

__global__ void fused_sgd_kernel(UpdateChunks c, float momentum, const float* __restrict__ neg_lr) {
  if (c.found_inf != nullptr && *c.found_inf != 0.0f) return;  // an overflowed fp16 step is skipped whole
  const UpdateSlice s = c.slices[c.chunk_tensor[blockIdx.x]];
  const int64_t begin = c.chunk_begin[blockIdx.x];
  const int64_t end = begin + c.chunk_size < s.size ? begin + c.chunk_size : s.size;
  const float lr = *neg_lr;
  const float scale = c.grad_scale != nullptr ? *c.grad_scale : 1.0f;
  for (int64_t i = begin + threadIdx.x; i < end; i += blockDim.x) {
    const float p = s.param[i];
    const float b = momentum * s.state0[i] + s.grad[i] * scale + s.weight_decay * p;
    s.state0[i] = b;
    s.param[i] = p + lr * b;
  }
}

__global__ void fused_adamw_kernel(UpdateChunks c, float beta1, float beta2, float rest1, float rest2, float eps,
                                   const float* __restrict__ lr_in, const float* __restrict__ steps) {
  if (c.found_inf != nullptr && *c.found_inf != 0.0f) return;
  const UpdateSlice s = c.slices[c.chunk_tensor[blockIdx.x]];
  const int64_t begin = c.chunk_begin[blockIdx.x];
  const int64_t end = begin + c.chunk_size < s.size ? begin + c.chunk_size : s.size;
  const float lr = *lr_in, t = *steps;
  const float scale = c.grad_scale != nullptr ? *c.grad_scale : 1.0f;
  const float step_size = lr / (1.0f - powf(beta1, t));
  const float correction2_sqrt = sqrtf(1.0f - powf(beta2, t));
  const float decay = 1.0f - lr * s.weight_decay;
  for (int64_t i = begin + threadIdx.x; i < end; i += blockDim.x) {
    const float g = s.grad[i] * scale;
    const float m = beta1 * s.state0[i] + rest1 * g;
    const float v = beta2 * s.state1[i] + rest2 * g * g;
    s.state0[i] = m;
    s.state1[i] = v;
    s.param[i] = s.param[i] * decay - step_size * m / (sqrtf(v) / correction2_sqrt + eps);
  }
}

}  // namespace

void normalize_images(const uint8_t* in, void* out, OutType type, int64_t images, int64_t height, int64_t width,
                      int out_channels, bool channels_last, const float scale[3], const float shift[3],
                      cudaStream_t stream) {
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
                                                       out_channels, channels_last, affine);
      break;
    case OutType::F16:
      normalize_kernel<<<blocks, threads, 0, stream>>>(in, static_cast<__half*>(out), pixels, height * width,
                                                       out_channels, channels_last, affine);
      break;
    case OutType::BF16:
      normalize_kernel<<<blocks, threads, 0, stream>>>(in, static_cast<__nv_bfloat16*>(out), pixels, height * width,
                                                       out_channels, channels_last, affine);
      break;
  }
  RN50_CUDA_CHECK(cudaGetLastError());
}

void fused_sgd(const UpdateChunks& chunks, float momentum, const float* neg_lr, cudaStream_t stream) {
  if (chunks.num_chunks == 0) return;
  fused_sgd_kernel<<<static_cast<unsigned>(chunks.num_chunks), launch::kThreads, 0, stream>>>(chunks, momentum, neg_lr);
  RN50_CUDA_CHECK(cudaGetLastError());
}

void fused_adamw(const UpdateChunks& chunks, double beta1, double beta2, float eps, const float* lr, const float* steps,
                 cudaStream_t stream) {
  if (chunks.num_chunks == 0) return;
  // As ATen's ops take them: the betas rounded to float, their complements rounded from double.
  fused_adamw_kernel<<<static_cast<unsigned>(chunks.num_chunks), launch::kThreads, 0, stream>>>(
      chunks, static_cast<float>(beta1), static_cast<float>(beta2), static_cast<float>(1.0 - beta1),
      static_cast<float>(1.0 - beta2), eps, lr, steps);
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
