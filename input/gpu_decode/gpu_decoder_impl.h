// input/gpu_decode/gpu_decoder_impl.h: GpuJpegDecoder::Impl, the GPU decoder's state (its slots, nvJPEG's handles
// and per-batch scratch, the counts) and its parts: the lifecycle, submit and finish_into in gpu_decoder.cpp, routing
// and the three decoders in gpu_decoder_routes.cpp. Included only by those two files.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/cuda/CUDAStream.h>
#include <nvjpeg.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "codecs/jpeg_codec.h"
#include "core/clock.h"
#include "cuda/kernels.h"
#include "input/gpu_decode/crop_resample.h"
#include "input/gpu_decode/decode_pipeline.h"
#include "input/gpu_decode/gpu_decoder.h"
#include "input/gpu_decode/nvjpeg_support.h"

namespace rn50::input {

struct GpuJpegDecoder::Impl {
  // One of the batches in flight: its decoded images, tables and the events that guard their reuse.
  struct Slot {
    GrowingDeviceBuffer decoded;  // the batch's decoded images (RGB, or planes), written on the decode stream
    PinnedMemory jobs_host;       // kernel table, copied to jobs_device on the compute stream
    at::Tensor jobs_device;
    PinnedMemory labels_host;    // the batch's labels: a copy from pageable memory would wait for the compute stream
    PinnedMemory fallback_host;  // libjpeg's images, allocated on the first fallback
    CudaEventOwner decode_done;  // on the decode stream: `decoded` holds the batch
    CudaEventOwner kernel_done;  // on the compute stream: kernel and label copy finished; the slot is free
    // For the device times in GpuDecodeCounts only: read once kernel_done has completed, so never waited for.
    CudaEventOwner decode_started;  // on the decode stream, before nvJPEG's calls for the batch
    CudaEventOwner input_wanted;    // on the compute stream, before it waits for decode_done
    CudaEventOwner kernel_started;  // on the compute stream, after that wait
    // The hardware decoder's state, one per slot: a batch's decode may still run when the next batch starts, and
    // a state reused then could have its staging overwritten (as happened on the default backend). Reused only
    // after kernel_done, which follows this slot's whole decode.
    StateOwner hardware_state;
    int hardware_batch = 0;  // the image count hardware_state was initialised for; 0: to initialise
    uint64_t sequence = 0;   // the number of the batch in flight
    std::optional<data::HostBatch> in_flight;
    ReleaseBatch release;
  };
  struct Job {
    data::HostBatch batch;
    BadDecodeHandler on_bad;
    ReleaseBatch release;
  };

  int device = 0;
  int max_batch = 0;
  int out_size = 0;
  input::Normalization norm = input::imagenet_normalization();
  // From LibTorch's pool at high priority, so that nvJPEG's kernels (the colour conversion after the hardware
  // engines, the default backend's IDCT) need not wait behind the training step's, which fill every SM. (Normal
  // priority trained as fast on the H200: docs/gpu-decoding.md, tried and not adopted.)
  c10::cuda::CUDAStream decode_stream;
  // The default backend's images, each waited for on the host (see decode_hybrid): a stream of their own, so that
  // the wait does not include the other batch's hardware decode, queued on decode_stream a step earlier.
  c10::cuda::CUDAStream hybrid_stream;
  // Declared before the handles, the handles before their states and streams: destroyed in the reverse order.
  NvjpegMemory nvjpeg_memory;
  HandleOwner hardware, hybrid;
  StateOwner hybrid_state;
  StreamOwner hardware_parse, hybrid_parse;
  std::string hardware_status;  // why there is no hardware route, when there is none
  unsigned hardware_engines = 0;
  bool interpolated_chroma = false;
  bool no_pipeline = false;  // the hardware decoder without nvJPEG's buffering across calls
  // The hardware decoder hands out YCbCr planes (GpuDecoderOptions::planar); the decode thread may turn it off.
  std::atomic<bool> planar{false};
  std::vector<Slot> slots;  // GpuJpegDecoder::slots(options) of them; never resized (the pipeline holds indices)

  std::mutex counts_mutex;  // the decode thread and the caller's both add to `counts`
  GpuDecodeCounts counts;
  uint64_t allocations_counted = 0;  // nvJPEG's raw allocations up to the last take_counts
  // finish_into's pace: an event after everything queued before the previous finish_into (its step's previous
  // step). Before the first record, waiting for it returns at once (cudaEventSynchronize's documented behaviour).
  CudaEventOwner previous_finish_queued;

  // The decode thread's own, merged into `counts` after each batch.
  GpuDecodeCounts job_counts;
  double wait_in_call = 0;  // waited() seconds in the current batch
  bool hardware_failure_logged = false;
  codecs::DecodeScratch cpu_scratch;
  std::vector<unsigned char> header_copy;  // parse_header's

  // With `planar`: each hardware image's chroma planes, read from its header by route_of.
  struct ChromaLayout {
    int step_x = 0, step_y = 0;  // pixels per chroma sample, 1 or 2; 0: grey (Y only)
    int width = 0, height = 0;   // of the Cb and Cr planes
  };
  // The decode thread's per-batch scratch, one entry per sample, reserved once for max_batch samples.
  struct BatchScratch {
    std::vector<Route> routes;
    std::vector<size_t> offsets;  // of each image in the slot's decode buffer
    std::vector<input::ResamplePlan> plans;
    std::vector<bool> decoded;
    std::vector<std::string> reasons;  // why a sample did not decode, for the bad-sample report
    std::vector<ChromaLayout> layouts;
    // The hardware batch: positions in the batch, and nvJPEG's arguments.
    std::vector<int> hardware_positions;
    std::vector<const unsigned char*> hardware_data;
    std::vector<size_t> hardware_lengths;
    std::vector<nvjpegImage_t> hardware_images;
    void reserve(int n) {
      const auto size = static_cast<size_t>(n);
      routes.reserve(size);
      offsets.reserve(size);
      plans.reserve(size);
      decoded.reserve(size);
      reasons.reserve(size);
      layouts.reserve(size);
      hardware_positions.reserve(size);
      hardware_data.reserve(size);
      hardware_lengths.reserve(size);
      hardware_images.reserve(size);
    }
  };
  BatchScratch scratch;

  // The decode thread and the slots' cycle. Made last in the constructor and destroyed first (its thread joined),
  // after ~Impl has abandoned what it held.
  std::unique_ptr<DecodePipeline<Job>> pipeline;

  Impl(int device_in, int max_batch_in, int out_size_in, const GpuDecoderOptions& options);

  // What the pipeline's decode thread does with nvJPEG and CUDA.
  DecodePipeline<Job>::Work pipeline_work();

  // Queued work still writes the buffers about to be freed. No release here: the loader may be gone.
  ~Impl();

  // Runs `call` and adds its seconds to `total`.
  template <class Call>
  static void timed(double& total, Call&& call) {
    const auto start = Clock::now();
    call();
    total += seconds_since(start);
  }

  // Runs `wait` (a blocking CUDA call) and counts its time as waiting, not as the decoder's host work.
  template <class Wait>
  void waited(Wait&& wait) {
    double seconds = 0;
    timed(seconds, wait);
    job_counts.wait_s += seconds;
    wait_in_call += seconds;
  }

  // Waits for the device to be done with the slot's batch and hands the batch back; its waits and device times go
  // to `counts`. Outside the pipeline's lock, on the decode thread or in drain(). The host batch goes back once the
  // slot's kernel is done (the device reads only the loader-decoded images of it, copied before that kernel), and
  // when the wait fails too (a dead context runs no more copies).
  void retire(Slot& slot);

  void add_device_times(const GpuDecodeCounts& times);

  // nvJPEG's header parse walks the whole file for its markers: given only the headers up to the first scan's,
  // ended by an end-of-image marker, routing is an order of magnitude faster (docs/gpu-decoding.md). The whole
  // file only if that fails; the entropy-coded data it skips is for the decoders to check.
  bool parse_header(nvjpegHandle_t handle, const data::EncodedSample& s, nvjpegJpegStream_t parse);

  // Which decoder takes sample `s`, parsing its header with nvJPEG; with `planar`, `layout` gets the planes of a
  // sample for the hardware decoder.
  Route route_of(const data::EncodedSample& s, ChromaLayout& layout);

  // The chroma planes of a parsed 1- or 3-component stream whose Y plane is the whole frame, when each chroma
  // sample covers 1 or 2 pixels a side and the planes are more than 2 samples a side (below that libjpeg repeats
  // samples instead of interpolating, and a 1-sample side would not tell 4:2:0 from 4:4:0).
  static bool chroma_layout(nvjpegJpegStream_t parse, int width, int height, ChromaLayout& layout);

  // Where the hardware decoder writes image i: interleaved RGB, or with `planar` the Y plane and then the Cb and
  // Cr planes (input::use_packed_planes' layout; a grey image's chroma pointers lead to unused full-size room: its
  // whole-image allocation holds three planes).
  nvjpegImage_t hardware_destination(uint8_t* pixels, int i, int width, int height) const;

  static nvjpegImage_t rgb_destination(uint8_t* pixels, int width);

  void decode_hardware(const data::HostBatch& batch, Slot& slot, uint8_t* base);

  // One batched hardware call for the images at hardware_positions. When a planar batch fails and the same batch
  // then decodes as RGB, nvJPEG does not take planar output here: decode_yuv is turned off for good (logged).
  nvjpegStatus_t decode_hardware_batch(const data::HostBatch& batch, Slot& slot, uint8_t* base);

  nvjpegStatus_t hardware_call(const data::HostBatch& batch, Slot& slot, uint8_t* base);

  void decode_hybrid(const data::HostBatch& batch, uint8_t* base);

  // The images the loader's threads finished (Route::kPredecoded), copied from the host batch into the slot's
  // buffer: one copy per run of neighbours, which lie side by side on both ends.
  void upload_predecoded(const data::HostBatch& batch, uint8_t* base);

  // libjpeg makes the finished out_size image (the CPU path's own crop, resize and flip); the kernel then only
  // normalises it, through the identity plan.
  void decode_cpu(const data::HostBatch& batch, Slot& slot, uint8_t* base);

  void submit(const data::HostBatch& batch, const BadDecodeHandler& on_bad, const ReleaseBatch& release);

  // The decode thread's counts of its last batch into `counts`.
  void add_job_counts();

  // On the decode thread: batch `number` into `slot`. On an exception nothing of the batch is held (the pipeline
  // hands it back).
  void decode_job(const Job& job, Slot& slot, uint64_t number);

  // decode_job's work for `slot`: route, decode, replace what failed, fill the kernel's table and the labels,
  // and record decode_done.
  void queue_decode(const data::HostBatch& batch, Slot& slot, const BadDecodeHandler& on_bad);

  void finish_into(at::Tensor& images, at::Tensor& labels);

  // Adds to one of `counts`' seconds from the caller's thread.
  void add_seconds(double& total, double seconds);

  bool holds_submitted() { return pipeline->holds_submitted(); }
  uint64_t finished_batches() { return pipeline->finished_count(); }

  // Every finished batch back once the device has read it. A batch submitted and not yet finished stays for the
  // next finish_into: the next epoch's first batches, decoding while this epoch's last steps train.
  void drain() { pipeline->drain(); }

  // After an error: drops the batches not yet decoded, waits for the decode thread and the device, and forgets
  // every batch held, handing none back (their loader may be gone).
  void abandon();

  void check_batch(const data::HostBatch& batch) const;

  void check_outputs(int n, const at::Tensor& images, const at::Tensor& labels) const;

  static bool is_channels_last(const at::Tensor& images);

  static cuda::kernels::OutType output_type(const at::Tensor& images);

  std::string describe() const;
};

}  // namespace rn50::input
