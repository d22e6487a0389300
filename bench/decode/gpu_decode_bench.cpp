// bench/decode/gpu_decode_bench.cpp: the GPU decode-and-augment rate: batches of encoded samples (as the loader
// hands them out) through GpuJpegDecoder into a half-precision channels-last input, timed until the device is done;
// and, optionally, whether decoding overlaps a simulated training step queued before each batch.
#include "bench/decode/gpu_decode_bench.h"

#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/CUDAEvent.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <utility>

#include "codecs/jpeg_header.h"
#include "core/clock.h"
#include "core/errors.h"
#include "cuda/cuda_check.h"
#include "data/dataset.h"
#include "input/gpu_decode/gpu_decoder.h"

namespace rn50::bench {

using input::BadDecodeHandler;
using input::GpuDecodeCounts;
using input::GpuJpegDecoder;
using input::ReleaseBatch;

namespace {

// The training step the decode runs beside: a stand-in of FP32 matrix products queued on the current stream, about
// `ms` of them, or a real step the caller queues.
class StepBeside {
 public:
  StepBeside(int device, double ms) {
    const auto options =
        at::TensorOptions(at::Device(at::kCUDA, static_cast<c10::DeviceIndex>(device))).dtype(at::kFloat);
    a_ = at::rand({kSide, kSide}, options);
    product_ = at::empty({kSide, kSide}, options);
    product();  // cuBLAS's first-call set-up, outside the calibration
    const double per_product = elapsed_ms([&] {
                                 for (int k = 0; k < 20; ++k) product();
                               }) /
                               20;
    products_ = std::max(1, static_cast<int>(std::lround(ms / per_product)));
  }
  explicit StepBeside(QueueStep real) : real_(std::move(real)) {}
  void queue() {
    if (real_) return real_();
    for (int k = 0; k < products_; ++k) product();
  }
  // One step's time on an otherwise idle device: the median of five.
  double alone_ms() {
    std::vector<double> times;
    for (int i = 0; i < 5; ++i) times.push_back(elapsed_ms([&] { queue(); }));
    std::sort(times.begin(), times.end());
    return times[2];
  }

 private:
  static constexpr int64_t kSide = 4096;
  void product() { at::mm_out(product_, a_, a_); }
  template <class Work>
  static double elapsed_ms(Work&& work) {
    at::cuda::CUDAEvent start(cudaEventDefault), end(cudaEventDefault);
    at::cuda::getCurrentCUDAStream().synchronize();
    start.record();
    work();
    end.record();
    end.synchronize();
    return start.elapsed_time(end);
  }
  QueueStep real_;
  at::Tensor a_, product_;
  int products_ = 1;
};

}  // namespace

GpuDecodeBenchResult run_gpu_decode_bench(const std::vector<std::vector<uint8_t>>& files, int out_size, int batch_size,
                                          double seconds, int device, double step_ms,
                                          const input::GpuDecoderOptions& decoder_options, int out_channels,
                                          const QueueStep& queue_step) {
  if (files.empty() || batch_size < 1) throw DataError("bench-decode: no files, or an empty batch");
  c10::cuda::CUDAGuard device_guard(static_cast<c10::DeviceIndex>(device));
  c10::cuda::CUDAStreamGuard stream_guard(c10::cuda::getStreamFromPool(false, static_cast<c10::DeviceIndex>(device)));
  GpuJpegDecoder decoder(device, batch_size, out_size, decoder_options);

  // Host batches as the loader's pool would hold them, one more than the decoder holds: file bytes and headers
  // fixed, crops and flips drawn anew for every batch.
  const int host_batches = GpuJpegDecoder::held_batches(decoder_options) + 1;
  std::vector<std::vector<data::EncodedSample>> samples(host_batches, std::vector<data::EncodedSample>(batch_size));
  std::vector<std::vector<int64_t>> labels(host_batches, std::vector<int64_t>(batch_size, 0));
  for (int h = 0; h < host_batches; ++h) {
    for (int j = 0; j < batch_size; ++j) {
      data::EncodedSample& s = samples[h][j];
      s.bytes = files[(static_cast<size_t>(h) * batch_size + j) % files.size()];
      s.info = codecs::parse_jpeg_frame_header(s.bytes.data(), s.bytes.size());
    }
  }
  const auto options = at::TensorOptions(at::Device(at::kCUDA, static_cast<c10::DeviceIndex>(device)));
  at::Tensor images = at::empty({batch_size, out_channels, out_size, out_size}, options.dtype(at::kHalf))
                          .contiguous(at::MemoryFormat::ChannelsLast);
  at::Tensor label_out = at::empty({batch_size}, options.dtype(at::kLong));
  const BadDecodeHandler fail = [](size_t, const std::string& reason) {
    throw DecodeError("bench-decode: a file did not decode: " + reason);
  };
  const ReleaseBatch keep = [](const data::HostBatch&) {};  // the host batches live for the whole run

  // Where the simulated step goes: right before each batch's decode (the naive order), or right after its batch's
  // input is made, with the decode of the batch submit_ahead ahead submitted after it (training's order).
  enum class StepOrder { kBeforeDecode, kDecodeAhead };
  auto measure = [&](bool train, StepBeside* step, StepOrder order) {
    data::SampleTransform transform;
    transform.train = train;
    transform.image_size = out_size;
    transform.resize_size = out_size * 8 / 7;  // 256 for 224
    transform.seed = 1;
    int64_t prepared = 0, finished = 0;
    auto next_batch = [&] {  // host batch `prepared`, with fresh crops
      const int h = static_cast<int>(prepared % host_batches);
      for (int j = 0; j < batch_size; ++j) {
        data::EncodedSample& s = samples[h][j];
        s.index = static_cast<size_t>(prepared * batch_size + j);
        s.geometry = data::sample_geometry(transform, s.info.width, s.info.height, 0, s.index);
      }
      data::HostBatch batch;
      batch.labels = labels[h].data();
      batch.size = batch_size;
      batch.index = prepared++;
      batch.encoded = samples[h].data();
      return batch;
    };
    int ahead = 0;  // batches submitted and not yet finished
    auto run_batch = [&] {
      if (order == StepOrder::kBeforeDecode) {
        if (step) step->queue();
        decoder.decode_into(next_batch(), images, label_out, fail, keep);
      } else {
        for (; ahead < decoder_options.submit_ahead; ++ahead) decoder.submit(next_batch(), fail, keep);
        decoder.finish_into(images, label_out);
        if (step) step->queue();
        decoder.submit(next_batch(), fail, keep);
      }
      ++finished;
    };
    // Batches submitted ahead are made into the input too (drain keeps submitted batches), and not counted.
    auto finish_all = [&] {
      for (; ahead > 0; --ahead) decoder.finish_into(images, label_out);
      decoder.drain();
    };
    for (int warm = 0; warm < 2; ++warm) run_batch();  // allocations and nvJPEG's first-use set-up
    finish_all();
    // Then the pipeline is filled again before the clock starts, and stopped when the last timed batch is made into
    // input, without waiting for the batches submitted ahead: the host is paced by the device (finish_into), so the
    // window holds the steady state alone, not the fill and drain (a few batches' time: 2-5% of a 0.5 s run).
    for (int fill = 0; fill < 2; ++fill) run_batch();
    const int64_t warm_batches = finished;
    const auto start = Clock::now();
    double elapsed = 0;
    while (elapsed < seconds) {
      run_batch();
      elapsed = seconds_since(start);
    }
    finish_all();
    RN50_CUDA_CHECK(cudaStreamSynchronize(at::cuda::getCurrentCUDAStream().stream()));
    return std::make_pair(static_cast<double>((finished - warm_batches) * batch_size) / elapsed,
                          elapsed * 1e3 / static_cast<double>(finished - warm_batches));
  };

  GpuDecodeBenchResult result;
  result.batch_size = batch_size;
  result.train_per_s = measure(true, nullptr, StepOrder::kBeforeDecode).first;
  result.val_per_s = measure(false, nullptr, StepOrder::kBeforeDecode).first;
  const GpuDecodeCounts counts = decoder.take_counts();
  result.hardware = counts.hardware;
  result.hybrid = counts.hybrid;
  result.cpu_fallback = counts.cpu_fallback;
  const int64_t routed = counts.hardware + counts.hybrid + counts.cpu_fallback + counts.bad;
  if (routed > 0) {
    auto per_image_us = [&](double seconds) { return seconds * 1e6 / static_cast<double>(routed); };
    result.host_us_per_image = per_image_us(counts.host_s);
    result.wait_us_per_image = per_image_us(counts.wait_s);
    result.route_us_per_image = per_image_us(counts.route_s);
    result.hardware_us_per_image = per_image_us(counts.hardware_call_s);
  }
  if (counts.device_batches > 0) {
    result.decode_latency_ms_per_batch = counts.decode_latency_s * 1e3 / static_cast<double>(counts.device_batches);
    result.crop_ms_per_batch = counts.crop_s * 1e3 / static_cast<double>(counts.device_batches);
  }
  result.routes = decoder.describe();
  if (step_ms > 0) {
    StepBeside step = queue_step ? StepBeside(queue_step) : StepBeside(device, step_ms);
    result.step_ms = step.alone_ms();
    result.step_then_decode_ms = measure(true, &step, StepOrder::kBeforeDecode).second;
    decoder.take_counts();  // the decode-ahead measurement's own counts below
    result.decode_ahead_ms = measure(true, &step, StepOrder::kDecodeAhead).second;
    result.decode_ahead_batches = decoder_options.submit_ahead;
    const GpuDecodeCounts ahead = decoder.take_counts();
    // Per image routed, as hardware_us_per_image above, so that the two compare.
    const int64_t ahead_routed = ahead.hardware + ahead.hybrid + ahead.cpu_fallback + ahead.bad;
    if (ahead_routed > 0)
      result.ahead_hardware_us_per_image = ahead.hardware_call_s * 1e6 / static_cast<double>(ahead_routed);
  }
  return result;
}

}  // namespace rn50::bench
