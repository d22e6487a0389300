// input/gpu_decode/gpu_decoder.h: decode: gpu. nvJPEG decodes a batch of compressed samples on the GPU (the hardware
// engines where they accept the image, nvJPEG's default backend where they do not, libjpeg for what nvJPEG refuses),
// and one kernel crops, resizes, flips and normalises the whole batch into the training step's input tensor.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "data/loader.h"
#include "input/gpu_decode/gpu_decoder_options.h"

namespace rn50::input {

// Whether this build has nvJPEG (CMake found it: RN50_HAVE_NVJPEG); decode: gpu needs it.
bool built_with_nvjpeg();

// Images per route since the last take_counts().
struct GpuDecodeCounts {
  int64_t hardware = 0;      // nvJPEG's hardware engines, in one batched call
  int64_t hybrid = 0;        // nvJPEG's default backend, one by one: what the engines refuse (progressive, ...)
  int64_t cpu_fallback = 0;  // libjpeg on the decode thread: what nvJPEG refuses (CMYK, streams it cannot parse)
  int64_t loader_cpu = 0;    // decoded by the loader's threads (decode_cpu_share): finished images, only uploaded
  int64_t bad = 0;           // nothing decoded them: replaced by another image of the batch
  // The decoder's host work: on its own thread routing, nvJPEG's host side and libjpeg; on the caller's, queuing
  // the crop kernel in finish_into.
  double host_s = 0;
  double wait_s = 0;           // the decode thread's waits for the device (a slot to free up, a default-backend image)
  double batch_wait_s = 0;     // the caller's waits in finish_into for the decode thread to finish the batch
  double pace_wait_s = 0;      // ... and for the device, which finish_into keeps at most two steps behind
  double route_s = 0;          // part of host_s: parsing headers with nvJPEG to choose each image's route
  double hardware_call_s = 0;  // part of host_s: inside nvJPEG's batched hardware calls
  double slowest_hardware_call_s = 0;  // the longest of those calls: one far above the mean stalls the host
  // On the device, from CUDA events, for the batches handed back so far (a batch is handed back when its slot is
  // next needed, so up to the last N+1 of an epoch count in the next; N: submit_ahead):
  int64_t device_batches = 0;  // the batches these three cover
  // Each batch from submit queuing it to its images being ready on the device: nvJPEG's host calls feed the device
  // work as they go, so this includes them (at least gpu_decode_hardware_call_s), not the device work alone.
  double decode_latency_s = 0;
  double input_stall_s = 0;  // the compute stream waiting for a batch's decode before making its input
  double crop_s = 0;         // the crop kernel and the label copy, on the compute stream
  // Buffers nvJPEG had to have freshly allocated (cudaMalloc, cudaHostAlloc: slow, and the host waits in them);
  // none once its memory pool has grown to what the batches need.
  int64_t new_buffers = 0;

  // Another decoder's counts into these (DecoderGroup): sums, and the slowest call of both.
  void add(const GpuDecodeCounts& o) {
    hardware += o.hardware;
    hybrid += o.hybrid;
    cpu_fallback += o.cpu_fallback;
    loader_cpu += o.loader_cpu;
    bad += o.bad;
    host_s += o.host_s;
    wait_s += o.wait_s;
    batch_wait_s += o.batch_wait_s;
    pace_wait_s += o.pace_wait_s;
    route_s += o.route_s;
    hardware_call_s += o.hardware_call_s;
    slowest_hardware_call_s = slowest_hardware_call_s > o.slowest_hardware_call_s ? slowest_hardware_call_s
                                                                                   : o.slowest_hardware_call_s;
    device_batches += o.device_batches;
    decode_latency_s += o.decode_latency_s;
    input_stall_s += o.input_stall_s;
    crop_s += o.crop_s;
    new_buffers += o.new_buffers;
  }
};

// Called, on the decoder's thread, for a sample that no decoder could read: its dataset index and the reasons. May
// throw (strict mode): finish_into then throws that for the batch.
using BadDecodeHandler = std::function<void(size_t index, const std::string& reason)>;
// Gets a host batch back once the device no longer reads its memory; called on the decoder's thread or in drain.
using ReleaseBatch = std::function<void(const data::HostBatch&)>;

// nvJPEG's calls run on a thread of the decoder's own: the batched hardware call returns only once its batch is
// decoded, and for some batches only once the device has run every step queued before it; on the training thread
// that held the next step back (docs/gpu-decoding.md). The caller submits batches ahead and finish_into makes each
// into input, in submit order.
class GpuJpegDecoder {
 public:
  // Device buffers a batch decodes into, each reused once finish_into has made its previous batch into input and
  // the device has run that batch's kernel. One more than the batches submitted ahead (N), so that batch k+N's
  // decode starts as soon as it is submitted, before step k+1 is queued: with N slots it started only once the
  // device began step k, when step k+1 was queued too, and the device then waited for the decode. Also the most
  // batches submitted and not yet finished.
  static int slots(const GpuDecoderOptions& options) { return options.submit_ahead + 1; }
  // Host batches held at once, at most: one in each slot until its kernel has run, and one submitted and waiting
  // for its slot.
  static int held_batches(const GpuDecoderOptions& options) { return slots(options) + 1; }

  // Batches of up to max_batch samples into out_size x out_size images on CUDA device `device`. Throws
  // rn50::ConfigError in builds without nvJPEG, std::invalid_argument for options.submit_ahead below 1.
  GpuJpegDecoder(int device, int max_batch, int out_size, const GpuDecoderOptions& options = {});
  ~GpuJpegDecoder();
  GpuJpegDecoder(const GpuJpegDecoder&) = delete;
  GpuJpegDecoder& operator=(const GpuJpegDecoder&) = delete;

  // Hands batch.encoded[0, batch.size) to the decode thread and returns (a sample marked predecoded is a finished
  // image in batch.images, uploaded as it is): nvJPEG decodes it on a stream of its own
  // while the steps queued before its use train. The batch's memory must stay as it is until `release` gets it
  // back (once the device is done with it). A sample nothing could decode goes to on_bad and is replaced by the
  // next decoded sample of the batch, label included (batch.labels is rewritten). More than slots(options)
  // batches submitted and not finished is a std::logic_error.
  void submit(const data::HostBatch& batch, const BadDecodeHandler& on_bad, const ReleaseBatch& release);
  // Makes the oldest submitted batch's input, once decoded: crops, resizes, flips and normalises it into `images`
  // ([N, C, S, S] float, half or bfloat16 on the device, NCHW or channels-last; C is 3, or up to 8 with zeros past
  // the third) and copies its labels into
  // `labels` (int64 [N]), both ready in order on the current stream. First it waits until the device has run
  // what was queued before the previous finish_into. Throws what the batch's decode threw (on_bad in strict mode,
  // a CUDA or nvJPEG error; the batch was handed back to `release` then), and the decoder goes on with the next
  // batch. An error outside any batch's decode (waiting for the device) stops the decode thread: finish_into and
  // submit throw it until abandon().
  void finish_into(at::Tensor& images, at::Tensor& labels);
  // submit, then finish_into.
  void decode_into(const data::HostBatch& batch, at::Tensor& images, at::Tensor& labels, const BadDecodeHandler& on_bad,
                   const ReleaseBatch& release);
  // After an error: drops the batches not yet decoded, waits for the decode thread and the device, and forgets
  // every batch held, releasing none (their loader may be gone).
  void abandon();
  // Waits for the device to finish reading every finished batch and releases them (before the loader that owns
  // them goes). A batch submitted and not yet finished stays held, for the next finish_into.
  void drain();
  GpuDecodeCounts take_counts();
  // Batches finish_into has taken so far, a failed decode's included; a throw that leaves its batch (bad tensors, a
  // stopped decode thread) does not count (DecoderGroup keeps its turn by it).
  uint64_t finished_batches();
  // The routes in use, for the start-up table.
  std::string describe() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace rn50::input
