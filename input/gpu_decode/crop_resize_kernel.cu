// input/gpu_decode/crop_resize_kernel.cu: the kernel behind crop_resize_normalize: one thread per output pixel, one
// grid row per image, the per-pixel arithmetic shared with the CPU reference (input/gpu_decode/resample_math.h).
#include "input/gpu_decode/crop_resize_kernel.h"

#include "cuda/cuda_check.h"
#include "cuda/launch.h"
#include "cuda/device_convert.cuh"

namespace rn50::input::kernels {
namespace {

template <typename T>
__global__ void crop_resize_normalize_kernel(const ResampleJob* __restrict__ jobs, int out_size, T* __restrict__ out,
                                             int channels, bool channels_last, cuda::kernels::Affine affine) {
  __shared__ ResampleJob job;  // every thread of the block works on the same image
  const int64_t n = blockIdx.y;
  if (threadIdx.x == 0) job = jobs[n];
  __syncthreads();
  const int64_t plane = static_cast<int64_t>(out_size) * out_size;
  const int64_t p = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (p >= plane) return;
  const int x = static_cast<int>(p % out_size), y = static_cast<int>(p / out_size);
  float rgb[3];
  resample::output_pixel(job.image, job.plan, x, y, out_size, rgb);
#pragma unroll
  for (int c = 0; c < 3; ++c) {
    const T value = cuda::kernels::to_out<T>(rgb[c] * affine.scale[c] - affine.shift[c]);
    if (channels_last)
      out[(n * plane + p) * channels + c] = value;
    else
      out[(n * channels + c) * plane + p] = value;
  }
  for (int c = 3; c < channels; ++c) {  // a ResNet stem's padded channels
    if (channels_last)
      out[(n * plane + p) * channels + c] = cuda::kernels::to_out<T>(0.0f);
    else
      out[(n * channels + c) * plane + p] = cuda::kernels::to_out<T>(0.0f);
  }
}

}  // namespace

void crop_resize_normalize(const ResampleJob* jobs, int64_t images, int out_size, void* out,
                           cuda::kernels::OutType type, int out_channels, bool channels_last, const float scale[3],
                           const float shift[3], cudaStream_t stream) {
  if (images == 0) return;
  cuda::kernels::Affine affine{};
  for (int c = 0; c < 3; ++c) {
    affine.scale[c] = scale[c];
    affine.shift[c] = shift[c];
  }
  const int threads = cuda::launch::kThreads;
  const int64_t plane = static_cast<int64_t>(out_size) * out_size;
  const dim3 grid(static_cast<unsigned>((plane + threads - 1) / threads), static_cast<unsigned>(images));
  switch (type) {
    case cuda::kernels::OutType::F32:
      crop_resize_normalize_kernel<<<grid, threads, 0, stream>>>(jobs, out_size, static_cast<float*>(out),
                                                                 out_channels, channels_last, affine);
      break;
    case cuda::kernels::OutType::F16:
      crop_resize_normalize_kernel<<<grid, threads, 0, stream>>>(jobs, out_size, static_cast<__half*>(out),
                                                                 out_channels, channels_last, affine);
      break;
    case cuda::kernels::OutType::BF16:
      crop_resize_normalize_kernel<<<grid, threads, 0, stream>>>(jobs, out_size, static_cast<__nv_bfloat16*>(out),
                                                                 out_channels, channels_last, affine);
      break;
  }
  RN50_CUDA_CHECK(cudaGetLastError());
}

}  // namespace rn50::input::kernels
