// gpu/gpu_decode_bench.cpp: the GPU decode-and-augment rate: batches of encoded samples (as the loader hands them
// out) through GpuJpegDecoder into a half-precision channels-last input, timed until the device is done.
#include "gpu/gpu_decode_bench.h"

#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <chrono>

#include "core/errors.h"
#include "data/dataset.h"
#include "data/jpeg_header.h"
#include "gpu/cuda_check.h"
#include "gpu/gpu_decoder.h"

namespace rn50::gpu {

GpuDecodeBenchResult run_gpu_decode_bench(const std::vector<std::vector<uint8_t>>& files, int out_size, int batch_size,
                                          double seconds, int device) {
  if (files.empty() || batch_size < 1) throw DataError("bench-decode: no files, or an empty batch");
  c10::cuda::CUDAGuard device_guard(static_cast<c10::DeviceIndex>(device));
  c10::cuda::CUDAStreamGuard stream_guard(c10::cuda::getStreamFromPool(false, static_cast<c10::DeviceIndex>(device)));
  GpuJpegDecoder decoder(device, batch_size, out_size);

  // Three host batches, as the loader's pool would hold them while the decoder holds two: file bytes and
  // headers fixed, crops and flips drawn anew for every batch.
  constexpr int kHostBatches = 3;
  std::vector<std::vector<data::EncodedSample>> samples(kHostBatches, std::vector<data::EncodedSample>(batch_size));
  std::vector<std::vector<int64_t>> labels(kHostBatches, std::vector<int64_t>(batch_size, 0));
  for (int h = 0; h < kHostBatches; ++h) {
    for (int j = 0; j < batch_size; ++j) {
      data::EncodedSample& s = samples[h][j];
      s.bytes = files[(static_cast<size_t>(h) * batch_size + j) % files.size()];
      s.info = data::parse_jpeg_frame_header(s.bytes.data(), s.bytes.size());
    }
  }
  const auto options = at::TensorOptions(at::Device(at::kCUDA, static_cast<c10::DeviceIndex>(device)));
  at::Tensor images = at::empty({batch_size, 3, out_size, out_size}, options.dtype(at::kHalf))
                          .contiguous(at::MemoryFormat::ChannelsLast);
  at::Tensor label_out = at::empty({batch_size}, options.dtype(at::kLong));
  const BadDecodeHandler fail = [](size_t, const std::string& reason) {
    throw DecodeError("bench-decode: a file did not decode: " + reason);
  };
  const ReleaseBatch keep = [](const data::HostBatch&) {};  // the host batches live for the whole run

  using Clock = std::chrono::steady_clock;
  auto measure = [&](bool train) {
    data::SampleTransform transform;
    transform.train = train;
    transform.image_size = out_size;
    transform.resize_size = out_size * 8 / 7;  // 256 for 224
    transform.seed = 1;
    int64_t batches = 0;
    auto run_batch = [&] {
      const int h = static_cast<int>(batches % kHostBatches);
      for (int j = 0; j < batch_size; ++j) {
        data::EncodedSample& s = samples[h][j];
        s.index = static_cast<size_t>(batches * batch_size + j);
        s.geometry = data::sample_geometry(transform, s.info.width, s.info.height, 0, s.index);
      }
      data::HostBatch batch;
      batch.labels = labels[h].data();
      batch.size = batch_size;
      batch.index = batches;
      batch.encoded = samples[h].data();
      decoder.decode_into(batch, images, label_out, fail, keep);
      ++batches;
    };
    for (int warm = 0; warm < 2; ++warm) run_batch();  // allocations and nvJPEG's first-use set-up
    decoder.drain();
    const int64_t warm_batches = batches;
    const auto start = Clock::now();
    double elapsed = 0;
    while (elapsed < seconds) {
      run_batch();
      elapsed = std::chrono::duration<double>(Clock::now() - start).count();
    }
    decoder.drain();
    RN50_CUDA_CHECK(cudaStreamSynchronize(at::cuda::getCurrentCUDAStream().stream()));
    elapsed = std::chrono::duration<double>(Clock::now() - start).count();
    return static_cast<double>((batches - warm_batches) * batch_size) / elapsed;
  };

  GpuDecodeBenchResult result;
  result.batch_size = batch_size;
  result.train_per_s = measure(true);
  result.val_per_s = measure(false);
  const GpuDecodeCounts counts = decoder.take_counts();
  result.hardware = counts.hardware;
  result.hybrid = counts.hybrid;
  result.cpu_fallback = counts.cpu_fallback;
  const int64_t routed = counts.hardware + counts.hybrid + counts.cpu_fallback + counts.bad;
  if (routed > 0) {
    result.host_us_per_image = counts.host_s * 1e6 / static_cast<double>(routed);
    result.wait_us_per_image = counts.wait_s * 1e6 / static_cast<double>(routed);
    result.route_us_per_image = counts.route_s * 1e6 / static_cast<double>(routed);
    result.hardware_us_per_image = counts.hardware_call_s * 1e6 / static_cast<double>(routed);
  }
  result.routes = decoder.describe();
  return result;
}

}  // namespace rn50::gpu
