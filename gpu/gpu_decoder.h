// gpu/gpu_decoder.h: decode: gpu. nvJPEG decodes a batch of compressed samples on the GPU (the hardware engines
// where they accept the image, nvJPEG's default backend where they do not, libjpeg for what nvJPEG refuses), and
// one kernel crops, resizes, flips and normalises the whole batch into the training step's input tensor.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "data/loader.h"
#include "gpu/gpu_decoder_options.h"

namespace rn50::gpu {

// Whether this build has nvJPEG (CMake found it: RN50_HAVE_NVJPEG); decode: gpu needs it.
bool built_with_nvjpeg();

// Images per route since the last take_counts().
struct GpuDecodeCounts {
  int64_t hardware = 0;      // nvJPEG's hardware engines, in one batched call
  int64_t hybrid = 0;        // nvJPEG's default backend, one by one: what the engines refuse (progressive, ...)
  int64_t cpu_fallback = 0;  // libjpeg on the calling thread: what nvJPEG refuses (CMYK, streams it cannot parse)
  int64_t bad = 0;           // nothing decoded them: replaced by another image of the batch
  double host_s = 0;  // the calling thread's work in submit and finish_into (routing, nvJPEG's host side, libjpeg)
  double wait_s = 0;  // ... and its waits there for the device (a slot to free up, a default-backend image)
  double route_s = 0;          // part of host_s: parsing headers with nvJPEG to choose each image's route
  double hardware_call_s = 0;  // part of host_s: inside nvJPEG's batched hardware calls
  double slowest_hardware_call_s = 0;  // the longest of those calls: one far above the mean stalls the host
  // On the device, from CUDA events, for the batches handed back so far (a batch is handed back when its slot is
  // next needed, so the last one or two of an epoch count in the next):
  int64_t device_batches = 0;  // the batches these three cover
  // Each batch from submit queuing it to its images being ready on the device: nvJPEG's host calls feed the device
  // work as they go, so this includes them (at least gpu_decode_hardware_call_s), not the device work alone.
  double decode_latency_s = 0;
  double input_stall_s = 0;    // the compute stream waiting for a batch's decode before making its input
  double crop_s = 0;           // the crop kernel and the label copy, on the compute stream
  // Buffers nvJPEG had to have freshly allocated (cudaMalloc, cudaHostAlloc: slow, and the host waits in them);
  // none once its memory pool has grown to what the batches need.
  int64_t new_buffers = 0;
};

// Called for a sample that no decoder could read: its dataset index and the reasons. May throw (strict mode).
using BadDecodeHandler = std::function<void(size_t index, const std::string& reason)>;
// Gets a host batch back once the device no longer reads its memory.
using ReleaseBatch = std::function<void(const data::HostBatch&)>;

class GpuJpegDecoder {
 public:
  // Batches held at once. Training submits a batch after queuing the step before its use; that submit reuses the
  // slot of two batches back, so it waits for the step before that to start. Three slots (the host a step further
  // ahead) trained no faster on the H200, and nvJPEG's slowest call per epoch grew from 88-91 to 110-115 ms
  // (bench/results/2026-11-30-h200-d.md, -e.md).
  static constexpr int kSlots = 2;

  // Batches of up to max_batch samples into out_size x out_size images on CUDA device `device`. Throws
  // rn50::ConfigError in builds without nvJPEG.
  GpuJpegDecoder(int device, int max_batch, int out_size, const GpuDecoderOptions& options = {});
  ~GpuJpegDecoder();
  GpuJpegDecoder(const GpuJpegDecoder&) = delete;
  GpuJpegDecoder& operator=(const GpuJpegDecoder&) = delete;

  // Queues the decode of batch.encoded[0, batch.size): nvJPEG runs on a stream of its own, so that the batch can
  // decode while the step queued before its use trains. A sample nothing could decode goes to on_bad and is
  // replaced by the next decoded sample of the batch, label included (batch.labels is rewritten). At most kSlots
  // batches are held (submitted, or finished and still read by the device): one more submit first waits for the
  // oldest finished one; `release` gets each back when the device is done with it.
  void submit(const data::HostBatch& batch, const BadDecodeHandler& on_bad, const ReleaseBatch& release);
  // Makes the oldest submitted batch's input: crops, resizes, flips and normalises it into `images` ([N, 3, S, S]
  // float, half or bfloat16 on the device, NCHW or channels-last) and copies its labels into `labels` (int64 [N]),
  // both ready in order on the current stream, after the batch's decode.
  void finish_into(at::Tensor& images, at::Tensor& labels);
  // submit, then finish_into.
  void decode_into(const data::HostBatch& batch, at::Tensor& images, at::Tensor& labels, const BadDecodeHandler& on_bad,
                   const ReleaseBatch& release);
  // After an error: waits for the device and forgets every batch held, releasing none (their loader may be gone).
  void abandon();
  // Waits for the device to finish reading every finished batch and releases them (before the loader that owns
  // them goes). A batch submitted and not yet finished stays held, for the next finish_into.
  void drain();
  GpuDecodeCounts take_counts();
  // The routes in use, for the start-up table.
  std::string describe() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace rn50::gpu
