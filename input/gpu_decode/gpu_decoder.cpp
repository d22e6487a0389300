// input/gpu_decode/gpu_decoder.cpp: GpuJpegDecoder on nvJPEG (built only when CMake found it). On the decoder's own thread
// (gpu/decode_pipeline.h), per batch: route each sample (hardware engines, nvJPEG's default backend, libjpeg),
// decode into one of N+1 reusable device buffers (N: the batches submitted ahead) on the decode stream, plan, and
// replace what failed; on the caller's thread, the crop-resize-normalise kernel on the current stream.
#include "input/gpu_decode/gpu_decoder.h"

#include <ATen/cuda/CUDAContext.h>
#include <ATen/ops/empty.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <nvjpeg.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <exception>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <type_traits>
#include <utility>
#include <vector>

#include "core/errors.h"
#include "core/log.h"
#include "input/gpu_decode/crop_resample.h"
#include "codecs/jpeg_codec.h"
#include "input/gpu_decode/crop_resize_kernel.h"
#include "cuda/cuda_check.h"
#include "input/gpu_decode/decode_pipeline.h"
#include "input/gpu_decode/deferred_reuse_memory.h"
#include "input/gpu_decode/nvjpeg_check.h"

namespace rn50::input {
namespace {

// ---- owners of nvJPEG and CUDA objects: every one is released by its unique_ptr's deleter ----------------

template <class Handle, nvjpegStatus_t (*destroy)(Handle)>
struct NvjpegDeleter {
  void operator()(Handle h) const { destroy(h); }
};
using HandleOwner =
    std::unique_ptr<std::remove_pointer_t<nvjpegHandle_t>, NvjpegDeleter<nvjpegHandle_t, nvjpegDestroy>>;
using StateOwner =
    std::unique_ptr<std::remove_pointer_t<nvjpegJpegState_t>, NvjpegDeleter<nvjpegJpegState_t, nvjpegJpegStateDestroy>>;
using StreamOwner = std::unique_ptr<std::remove_pointer_t<nvjpegJpegStream_t>,
                                    NvjpegDeleter<nvjpegJpegStream_t, nvjpegJpegStreamDestroy>>;

struct CudaEventDeleter {
  void operator()(cudaEvent_t e) const { cudaEventDestroy(e); }
};
struct PinnedFree {
  void operator()(void* p) const { cudaFreeHost(p); }
};
using CudaEventOwner = std::unique_ptr<std::remove_pointer_t<cudaEvent_t>, CudaEventDeleter>;
using PinnedMemory = std::unique_ptr<void, PinnedFree>;

CudaEventOwner make_timing_event() {
  cudaEvent_t event = nullptr;
  RN50_CUDA_CHECK(cudaEventCreate(&event));
  return CudaEventOwner(event);
}

// Seconds between two completed events.
double seconds_between(const CudaEventOwner& from, const CudaEventOwner& to) {
  float ms = 0;
  RN50_CUDA_CHECK(cudaEventElapsedTime(&ms, from.get(), to.get()));
  return ms / 1e3;
}

// Device memory as byte tensors from LibTorch's caching allocator, allocated for use on `stream` (a pool stream,
// never destroyed, so the allocator's blocks never name a dead stream): growing a buffer on the hot path does not
// synchronise the device, as cudaFree would.
at::Tensor device_alloc(size_t bytes, int device, cudaStream_t stream) {
  c10::cuda::CUDAStreamGuard on_stream(c10::cuda::getStreamFromExternal(stream, static_cast<c10::DeviceIndex>(device)));
  return at::empty({static_cast<int64_t>(bytes)}, at::TensorOptions().dtype(at::kByte).device(at::kCUDA, device));
}

PinnedMemory pinned_alloc(size_t bytes) {
  void* p = nullptr;
  RN50_CUDA_CHECK(cudaHostAlloc(&p, bytes, cudaHostAllocDefault));
  return PinnedMemory(p);
}

// Device memory that grows to the largest request and is then reused. Callers grow it only when no queued work
// reads it any more.
class GrowingDeviceBuffer {
 public:
  uint8_t* reserve(size_t bytes, int device, cudaStream_t stream) {
    if (bytes > capacity_) {
      memory_ = at::Tensor();  // freed first: the old contents are not needed
      capacity_ = 0;
      const size_t grown = bytes + bytes / 4;  // headroom, so that slightly larger batches do not reallocate
      memory_ = device_alloc(grown, device, stream);
      capacity_ = grown;
    }
    return memory_.data_ptr<uint8_t>();
  }

 private:
  at::Tensor memory_;
  size_t capacity_ = 0;
};

// The device and pinned memory that nvJPEG's handles allocate from.
struct NvjpegMemory {
  DeferredReuseMemory device{[](size_t size) -> void* {
                               void* p = nullptr;
                               if (cudaMalloc(&p, size) == cudaSuccess) return p;
                               cudaGetLastError();  // nvJPEG reports it: NVJPEG_STATUS_ALLOCATOR_FAILURE
                               return nullptr;
                             },
                             [](void* p) { cudaFree(p); }};
  DeferredReuseMemory pinned{[](size_t size) -> void* {
                               void* p = nullptr;
                               if (cudaHostAlloc(&p, size, cudaHostAllocDefault) == cudaSuccess) return p;
                               cudaGetLastError();
                               return nullptr;
                             },
                             [](void* p) { cudaFreeHost(p); }};
  void set_batch(uint64_t batch) {
    device.set_batch(batch);
    pinned.set_batch(batch);
  }
  void completed(uint64_t batch) {
    device.completed(batch);
    pinned.completed(batch);
  }
  uint64_t raw_allocations() const { return device.raw_allocations() + pinned.raw_allocations(); }
};

#if defined(NVJPEG_VER_MAJOR) && NVJPEG_VER_MAJOR >= 12
constexpr bool kOwnAllocators = true;  // nvjpegCreateExV2: allocators with a context
int device_malloc(void* memory, void** ptr, size_t size, cudaStream_t) {
  return static_cast<NvjpegMemory*>(memory)->device.allocate(ptr, size);
}
int device_free(void* memory, void* ptr, size_t, cudaStream_t) {
  return static_cast<NvjpegMemory*>(memory)->device.release(ptr);
}
int pinned_malloc(void* memory, void** ptr, size_t size, cudaStream_t) {
  return static_cast<NvjpegMemory*>(memory)->pinned.allocate(ptr, size);
}
int pinned_free(void* memory, void* ptr, size_t, cudaStream_t) {
  return static_cast<NvjpegMemory*>(memory)->pinned.release(ptr);
}
nvjpegStatus_t create_with(nvjpegBackend_t backend, unsigned flags, NvjpegMemory& memory, nvjpegHandle_t* handle) {
  nvjpegDevAllocatorV2_t device{};
  device.dev_malloc = device_malloc;
  device.dev_free = device_free;
  device.dev_ctx = &memory;
  nvjpegPinnedAllocatorV2_t pinned{};
  pinned.pinned_malloc = pinned_malloc;
  pinned.pinned_free = pinned_free;
  pinned.pinned_ctx = &memory;
  return nvjpegCreateExV2(backend, &device, &pinned, flags, handle);
}
#else
constexpr bool kOwnAllocators = false;  // nvJPEG before 12 has no allocators with a context: its defaults
nvjpegStatus_t create_with(nvjpegBackend_t backend, unsigned flags, NvjpegMemory&, nvjpegHandle_t* handle) {
  return nvjpegCreateEx(backend, nullptr, nullptr, flags, handle);
}
#endif

// nvJPEG handles with chroma upsampling by interpolation where the library has it: libjpeg's "fancy"
// upsampling, which the CPU path uses, is an interpolation too. Returns the creation status.
nvjpegStatus_t create_handle(nvjpegBackend_t backend, unsigned flags, NvjpegMemory& memory, HandleOwner& out,
                             bool& interpolated) {
  nvjpegHandle_t handle = nullptr;
  nvjpegStatus_t status = NVJPEG_STATUS_NOT_INITIALIZED;
  interpolated = false;
#ifdef NVJPEG_FLAGS_UPSAMPLING_WITH_INTERPOLATION
  status = create_with(backend, flags | NVJPEG_FLAGS_UPSAMPLING_WITH_INTERPOLATION, memory, &handle);
  interpolated = status == NVJPEG_STATUS_SUCCESS;
#endif
  if (status != NVJPEG_STATUS_SUCCESS) status = create_with(backend, flags, memory, &handle);
  if (status != NVJPEG_STATUS_SUCCESS) return status;
  out.reset(handle);
  // Headroom on every allocation, so that buffers are regrown rarely as image sizes vary from batch to batch
  // (16 MB device and 8 MB pinned, DALI's defaults).
  RN50_NVJPEG_CHECK(nvjpegSetDeviceMemoryPadding(size_t{16} << 20, handle));
  RN50_NVJPEG_CHECK(nvjpegSetPinnedMemoryPadding(size_t{8} << 20, handle));
  return status;
}

StateOwner make_state(nvjpegHandle_t handle) {
  nvjpegJpegState_t state = nullptr;
  RN50_NVJPEG_CHECK(nvjpegJpegStateCreate(handle, &state));
  return StateOwner(state);
}

// A header parser for `handle`.
StreamOwner make_parser(nvjpegHandle_t handle) {
  nvjpegJpegStream_t parse = nullptr;
  RN50_NVJPEG_CHECK(nvjpegJpegStreamCreate(handle, &parse));
  return StreamOwner(parse);
}

constexpr size_t kAlignment = 256;
size_t aligned(size_t bytes) { return (bytes + kAlignment - 1) / kAlignment * kAlignment; }

enum class Route { kHardware, kHybrid, kCpu };

}  // namespace

bool built_with_nvjpeg() { return true; }

struct GpuJpegDecoder::Impl {
  // One of the batches in flight: its decoded images, tables and the events that guard their reuse.
  struct Slot {
    GrowingDeviceBuffer decoded;  // the batch's decoded images (RGB, or planes), written on the decode stream
    PinnedMemory jobs_host;       // kernel table, copied to jobs_device on the compute stream
    at::Tensor jobs_device;
    PinnedMemory labels_host;  // the batch's labels: a copy from pageable memory would wait for the compute stream
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
  // engines, the default backend's IDCT) need not wait behind the training step's, which fill every SM. (Low
  // priority trained as fast on the H200: bench/results/2026-11-30-h200-c.md.)
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

  // Per-batch scratch, reserved once for max_batch samples.
  std::vector<Route> routes;
  std::vector<size_t> offsets;
  std::vector<input::ResamplePlan> plans;
  std::vector<bool> decoded;
  std::vector<std::string> reasons;
  std::vector<int> hardware_positions;
  std::vector<const unsigned char*> hardware_data;
  std::vector<size_t> hardware_lengths;
  std::vector<nvjpegImage_t> hardware_images;
  // With `planar`: each hardware image's chroma planes, read from its header by route_of.
  struct ChromaLayout {
    int step_x = 0, step_y = 0;  // pixels per chroma sample, 1 or 2; 0: grey (Y only)
    int width = 0, height = 0;   // of the Cb and Cr planes
  };
  std::vector<ChromaLayout> layouts;

  // The decode thread and the slots' cycle. Made last in the constructor and destroyed first (its thread joined),
  // after ~Impl has abandoned what it held.
  std::unique_ptr<DecodePipeline<Job>> pipeline;

  Impl(int device_in, int max_batch_in, int out_size_in, const GpuDecoderOptions& options)
      : device(device_in),
        max_batch(max_batch_in),
        out_size(out_size_in),
        decode_stream(c10::cuda::getStreamFromPool(/*isHighPriority=*/true, static_cast<c10::DeviceIndex>(device_in))),
        hybrid_stream(c10::cuda::getStreamFromPool(/*isHighPriority=*/true, static_cast<c10::DeviceIndex>(device_in))) {
    if (max_batch < 1 || out_size < 1) throw std::invalid_argument("GpuJpegDecoder: empty batches or images");
    if (options.submit_ahead < 1) throw std::invalid_argument("GpuJpegDecoder: submit_ahead below 1");
    slots = std::vector<Slot>(static_cast<size_t>(GpuJpegDecoder::slots(options)));
    c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(device));
    const cudaStream_t stream = decode_stream.stream();

    bool hardware_interpolated = false;
    const unsigned hardware_flags =
        options.hardware_no_pipeline ? NVJPEG_FLAGS_HW_DECODE_NO_PIPELINE : NVJPEG_FLAGS_DEFAULT;
    const nvjpegStatus_t hw =
        create_handle(NVJPEG_BACKEND_HARDWARE, hardware_flags, nvjpeg_memory, hardware, hardware_interpolated);
    no_pipeline = options.hardware_no_pipeline && hw == NVJPEG_STATUS_SUCCESS;
    planar = options.planar && hw == NVJPEG_STATUS_SUCCESS;
    if (hw == NVJPEG_STATUS_SUCCESS) {
      hardware_parse = make_parser(hardware.get());
      unsigned cores = 0;
      if (nvjpegGetHardwareDecoderInfo(hardware.get(), &hardware_engines, &cores) != NVJPEG_STATUS_SUCCESS)
        hardware_engines = 0;  // informational only
    } else {
      hardware_status = nvjpeg_status_name(hw);  // NVJPEG_STATUS_ARCH_MISMATCH on GPUs without the engines
    }
    RN50_NVJPEG_CHECK(
        create_handle(NVJPEG_BACKEND_DEFAULT, NVJPEG_FLAGS_DEFAULT, nvjpeg_memory, hybrid, interpolated_chroma));
    interpolated_chroma = interpolated_chroma && (!hardware || hardware_interpolated);
    hybrid_state = make_state(hybrid.get());
    hybrid_parse = make_parser(hybrid.get());

    for (Slot& slot : slots) {
      slot.jobs_host = pinned_alloc(sizeof(kernels::ResampleJob) * static_cast<size_t>(max_batch));
      slot.labels_host = pinned_alloc(sizeof(int64_t) * static_cast<size_t>(max_batch));
      slot.jobs_device = device_alloc(sizeof(kernels::ResampleJob) * static_cast<size_t>(max_batch), device, stream);
      for (CudaEventOwner* e :
           {&slot.decode_done, &slot.kernel_done, &slot.decode_started, &slot.input_wanted, &slot.kernel_started})
        *e = make_timing_event();
      if (hardware) slot.hardware_state = make_state(hardware.get());
    }
    routes.reserve(max_batch);
    offsets.reserve(max_batch);
    plans.reserve(max_batch);
    decoded.reserve(max_batch);
    reasons.reserve(max_batch);
    hardware_positions.reserve(max_batch);
    hardware_data.reserve(max_batch);
    hardware_lengths.reserve(max_batch);
    hardware_images.reserve(max_batch);
    layouts.reserve(max_batch);
    previous_finish_queued = make_timing_event();
    pipeline = std::make_unique<DecodePipeline<Job>>(static_cast<int>(slots.size()), pipeline_work());
  }

  // What the pipeline's decode thread does with nvJPEG and CUDA.
  DecodePipeline<Job>::Work pipeline_work() {
    DecodePipeline<Job>::Work work;
    // For the event calls outside decode_job's device guard too.
    work.on_thread_start = [this] { RN50_CUDA_CHECK(cudaSetDevice(device)); };
    work.decode = [this](const Job& job, int slot, uint64_t number) {
      try {
        decode_job(job, slots[slot], number);
      } catch (...) {
        add_job_counts();  // what it routed and counted before failing (the bad sample, say)
        throw;
      }
      add_job_counts();
    };
    work.hand_back = [](const Job& job) {
      if (job.release) job.release(job.batch);
    };
    work.device_done = [this](int slot) {
      if (cudaEventQuery(slots[slot].kernel_done.get()) != cudaErrorNotReady) return true;  // errors: met by retire
      cudaGetLastError();  // not an error
      return false;
    };
    work.retire = [this](int slot) { retire(slots[slot]); };
    return work;
  }

  // Queued work still writes the buffers about to be freed. No release here: the loader may be gone.
  ~Impl() {
    abandon();
    pipeline.reset();  // joins the decode thread before the members it uses go
  }

  // Runs `call` and adds its seconds to `total`.
  template <class Call>
  static void timed(double& total, Call&& call) {
    const auto start = std::chrono::steady_clock::now();
    call();
    total += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
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
  // to `counts`. Outside the pipeline's lock, on the decode thread or in drain(). The host batch goes back even
  // when the wait fails: the device never reads it (only the decode thread did, when decoding it), so its loader
  // may refill it whatever happened on the device.
  void retire(Slot& slot) {
    const data::HostBatch batch = *slot.in_flight;
    slot.in_flight.reset();
    const ReleaseBatch release = std::exchange(slot.release, nullptr);
    GpuDecodeCounts times;
    std::exception_ptr error;
    try {
      const auto wait_start = std::chrono::steady_clock::now();
      RN50_CUDA_CHECK(cudaEventSynchronize(slot.kernel_done.get()));
      times.wait_s += seconds_since(wait_start);
      ++times.device_batches;  // finished, so all five of its events are this batch's and complete
      times.decode_latency_s += seconds_between(slot.decode_started, slot.decode_done);
      times.input_stall_s += seconds_between(slot.input_wanted, slot.kernel_started);
      times.crop_s += seconds_between(slot.kernel_started, slot.kernel_done);
      nvjpeg_memory.completed(slot.sequence);  // and, in order, every batch before it
    } catch (...) {
      error = std::current_exception();
    }
    add_device_times(times);
    if (release) release(batch);
    if (error) std::rethrow_exception(error);
  }

  void add_device_times(const GpuDecodeCounts& times) {
    std::lock_guard<std::mutex> lock(counts_mutex);
    counts.wait_s += times.wait_s;
    counts.device_batches += times.device_batches;
    counts.decode_latency_s += times.decode_latency_s;
    counts.input_stall_s += times.input_stall_s;
    counts.crop_s += times.crop_s;
  }

  // nvJPEG's header parse walks the whole file for its markers: routing took 10-15 us an image of 95 KiB on the
  // training thread, 1 us with the headers up to the first scan's, ended by an end-of-image marker (the H200
  // machine, bench/results/2026-11-30-h200-f.md). The whole file only if that fails; the entropy-coded data it
  // skips is for the decoders to check.
  bool parse_header(nvjpegHandle_t handle, const data::EncodedSample& s, nvjpegJpegStream_t parse) {
    const size_t header = s.info.header_bytes;
    if (header > 0 && header < s.bytes.size()) {
      header_copy.assign(s.bytes.data(), s.bytes.data() + header);
      header_copy.push_back(0xFF);
      header_copy.push_back(0xD9);
      if (nvjpegJpegStreamParseHeader(handle, header_copy.data(), header_copy.size(), parse) == NVJPEG_STATUS_SUCCESS)
        return true;
    }
    return nvjpegJpegStreamParseHeader(handle, s.bytes.data(), s.bytes.size(), parse) == NVJPEG_STATUS_SUCCESS;
  }

  // Which decoder takes sample `s`, parsing its header with nvJPEG; with `planar`, `layout` gets the planes of a
  // sample for the hardware decoder.
  Route route_of(const data::EncodedSample& s, ChromaLayout& layout) {
    if (s.info.components == 4) return Route::kCpu;  // CMYK/YCCK: libjpeg applies the Adobe inversion the CPU path does
    nvjpegHandle_t handle = hardware ? hardware.get() : hybrid.get();
    nvjpegJpegStream_t parse = hardware ? hardware_parse.get() : hybrid_parse.get();
    if (!parse_header(handle, s, parse)) return Route::kCpu;
    unsigned width = 0, height = 0;
    if (nvjpegJpegStreamGetFrameDimensions(parse, &width, &height) != NVJPEG_STATUS_SUCCESS ||
        static_cast<int>(width) != s.info.width || static_cast<int>(height) != s.info.height)
      return Route::kCpu;  // the crop was drawn for the header's size; libjpeg will check that size again
    if (!hardware) return Route::kHybrid;
    int unsupported = -1;  // nvJPEG's convention: 0 means supported
    if (nvjpegDecodeBatchedSupported(hardware.get(), parse, &unsupported) != NVJPEG_STATUS_SUCCESS)
      return Route::kHybrid;
    if (unsupported != 0) return Route::kHybrid;
    // Planes the crop kernel does not convert (4:1:1, say) go to the default backend, which hands out RGB.
    if (planar && (s.info.rgb_coded || !chroma_layout(parse, s.info.width, s.info.height, layout)))
      return Route::kHybrid;
    return Route::kHardware;
  }

  // The chroma planes of a parsed 1- or 3-component stream whose Y plane is the whole frame, when each chroma
  // sample covers 1 or 2 pixels a side and the planes are more than 2 samples a side (below that libjpeg repeats
  // samples instead of interpolating, and a 1-sample side would not tell 4:2:0 from 4:4:0).
  static bool chroma_layout(nvjpegJpegStream_t parse, int width, int height, ChromaLayout& layout) {
    layout = ChromaLayout{};
    unsigned components = 0, luma_width = 0, luma_height = 0;
    if (nvjpegJpegStreamGetComponentsNum(parse, &components) != NVJPEG_STATUS_SUCCESS ||
        nvjpegJpegStreamGetComponentDimensions(parse, 0, &luma_width, &luma_height) != NVJPEG_STATUS_SUCCESS ||
        static_cast<int>(luma_width) != width || static_cast<int>(luma_height) != height)
      return false;
    if (components == 1) return true;  // grey
    if (components != 3) return false;
    unsigned cb_width = 0, cb_height = 0, cr_width = 0, cr_height = 0;
    if (nvjpegJpegStreamGetComponentDimensions(parse, 1, &cb_width, &cb_height) != NVJPEG_STATUS_SUCCESS ||
        nvjpegJpegStreamGetComponentDimensions(parse, 2, &cr_width, &cr_height) != NVJPEG_STATUS_SUCCESS ||
        cb_width != cr_width || cb_height != cr_height || cb_width <= 2 || cb_height <= 2)
      return false;
    const int w = static_cast<int>(cb_width), h = static_cast<int>(cb_height);
    const int step_x = (width + w - 1) / w, step_y = (height + h - 1) / h;
    if (step_x < 1 || step_x > 2 || step_y < 1 || step_y > 2 || (width + step_x - 1) / step_x != w ||
        (height + step_y - 1) / step_y != h)
      return false;
    layout = ChromaLayout{step_x, step_y, w, h};
    return true;
  }

  // Where the hardware decoder writes image i: interleaved RGB, or with `planar` the Y plane and then the Cb and
  // Cr planes (input::use_packed_planes' layout; a grey image's chroma pointers lead to unused full-size room: its
  // whole-image allocation holds three planes).
  nvjpegImage_t hardware_destination(uint8_t* pixels, int i, int width, int height) const {
    if (!planar) return rgb_destination(pixels, width);
    const ChromaLayout& c = layouts[i];
    const bool grey = c.step_x == 0;
    const size_t chroma_width = static_cast<size_t>(grey ? width : c.width);
    const size_t luma = static_cast<size_t>(width) * static_cast<size_t>(height);
    nvjpegImage_t image{};
    image.channel[0] = pixels;
    image.pitch[0] = static_cast<size_t>(width);
    image.channel[1] = pixels + luma;
    image.channel[2] = pixels + luma + chroma_width * static_cast<size_t>(grey ? height : c.height);
    image.pitch[1] = image.pitch[2] = chroma_width;
    return image;
  }

  static nvjpegImage_t rgb_destination(uint8_t* pixels, int width) {
    nvjpegImage_t image{};
    image.channel[0] = pixels;
    image.pitch[0] = static_cast<size_t>(width) * 3;
    return image;
  }

  void decode_hardware(const data::HostBatch& batch, Slot& slot, uint8_t* base) {
    hardware_positions.clear();
    hardware_data.clear();
    hardware_lengths.clear();
    for (int i = 0; i < static_cast<int>(batch.size); ++i) {
      if (routes[i] != Route::kHardware) continue;
      const data::EncodedSample& s = batch.encoded[i];
      hardware_positions.push_back(i);
      hardware_data.push_back(s.bytes.data());
      hardware_lengths.push_back(s.bytes.size());
    }
    if (hardware_positions.empty()) return;
    nvjpegStatus_t status = decode_hardware_batch(batch, slot, base);
    if (status == NVJPEG_STATUS_SUCCESS) {
      for (int i : hardware_positions) {
        decoded[i] = true;
        if (planar) {  // hardware_destination's layout
          const ChromaLayout& c = layouts[i];
          input::use_packed_planes(plans[i], c.step_x, c.step_y, c.width, c.height);
        }
      }
      job_counts.hardware += static_cast<int64_t>(hardware_positions.size());
      return;
    }
    // The batched call does not say which image failed: the default backend retries each one.
    slot.hardware_batch = 0;
    if (!hardware_failure_logged) {
      log_warn("nvJPEG's hardware decoder failed a batch (" + nvjpeg_status_name(status) +
               "); its images go through the default backend (logged once)");
      hardware_failure_logged = true;
    }
    for (int i : hardware_positions) routes[i] = Route::kHybrid;
  }

  // One batched hardware call for the images at hardware_positions. When a planar batch fails and the same batch
  // then decodes as RGB, nvJPEG does not take planar output here: decode_yuv is turned off for good (logged).
  nvjpegStatus_t decode_hardware_batch(const data::HostBatch& batch, Slot& slot, uint8_t* base) {
    const nvjpegStatus_t status = hardware_call(batch, slot, base);
    if (status == NVJPEG_STATUS_SUCCESS || !planar) return status;
    planar = false;
    for (Slot& other : slots) other.hardware_batch = 0;  // initialised for the other output format
    const nvjpegStatus_t as_rgb = hardware_call(batch, slot, base);
    if (as_rgb == NVJPEG_STATUS_SUCCESS) {
      log_warn("nvJPEG's hardware decoder failed a batch with planar output (" + nvjpeg_status_name(status) +
               ") and decoded it as RGB: decode_yuv is off from here on");
      return as_rgb;
    }
    planar = true;  // the batch itself is bad: planar output stays
    for (Slot& other : slots) other.hardware_batch = 0;
    return status;
  }

  nvjpegStatus_t hardware_call(const data::HostBatch& batch, Slot& slot, uint8_t* base) {
    const int count = static_cast<int>(hardware_positions.size());
    hardware_images.clear();
    for (int i : hardware_positions) {
      const data::EncodedSample& s = batch.encoded[i];
      hardware_images.push_back(hardware_destination(base + offsets[i], i, s.info.width, s.info.height));
    }
    nvjpegStatus_t status = NVJPEG_STATUS_SUCCESS;
    double call_s = 0;
    timed(call_s, [&] {
      // Initialised again only when the count changes or a batch failed: initialising resizes nvJPEG's buffers.
      if (slot.hardware_batch != count) {
        status = nvjpegDecodeBatchedInitialize(hardware.get(), slot.hardware_state.get(), count, 1,
                                               planar ? NVJPEG_OUTPUT_YUV : NVJPEG_OUTPUT_RGBI);
        slot.hardware_batch = status == NVJPEG_STATUS_SUCCESS ? count : 0;
      }
      if (status == NVJPEG_STATUS_SUCCESS)
        status = nvjpegDecodeBatched(hardware.get(), slot.hardware_state.get(), hardware_data.data(),
                                     hardware_lengths.data(), hardware_images.data(), decode_stream.stream());
    });
    job_counts.hardware_call_s += call_s;
    job_counts.slowest_hardware_call_s = std::max(job_counts.slowest_hardware_call_s, call_s);
    return status;
  }

  void decode_hybrid(const data::HostBatch& batch, uint8_t* base) {
    for (int i = 0; i < static_cast<int>(batch.size); ++i) {
      if (routes[i] != Route::kHybrid || decoded[i]) continue;
      const data::EncodedSample& s = batch.encoded[i];
      nvjpegImage_t image = rgb_destination(base + offsets[i], s.info.width);
      const nvjpegStatus_t status = nvjpegDecode(hybrid.get(), hybrid_state.get(), s.bytes.data(), s.bytes.size(),
                                                 NVJPEG_OUTPUT_RGBI, &image, hybrid_stream.stream());
      // The state stages each image in one pinned buffer that the next nvjpegDecode overwrites while this one's
      // copy to the device may still be queued: on the H200 the first of a batch's two progressive images came
      // out wrong (mean 35 levels off) in every batch after the first. So each decode finishes first. On GPUs
      // with hardware engines this route takes only what they refuse; on others it takes every image, one round
      // trip each (nvJPEG's decoupled API with alternating pinned buffers would lift that).
      // Finished here, so decode_done (recorded on decode_stream later) needs no event from hybrid_stream.
      waited([&] { RN50_CUDA_CHECK(cudaStreamSynchronize(hybrid_stream.stream())); });
      if (status == NVJPEG_STATUS_SUCCESS) {
        decoded[i] = true;
        ++job_counts.hybrid;
      } else {
        routes[i] = Route::kCpu;
        reasons[i] = "nvJPEG: " + nvjpeg_status_name(status);
      }
    }
  }

  // libjpeg makes the finished out_size image (the CPU path's own crop, resize and flip); the kernel then only
  // normalises it, through the identity plan.
  void decode_cpu(const data::HostBatch& batch, Slot& slot, uint8_t* base) {
    const size_t image_bytes = static_cast<size_t>(out_size) * out_size * 3;
    for (int i = 0; i < static_cast<int>(batch.size); ++i) {
      if (routes[i] != Route::kCpu) continue;
      const data::EncodedSample& s = batch.encoded[i];
      if (!slot.fallback_host) slot.fallback_host = pinned_alloc(image_bytes * static_cast<size_t>(max_batch));
      uint8_t* host = static_cast<uint8_t*>(slot.fallback_host.get()) + image_bytes * static_cast<size_t>(i);
      try {
        codecs::decode_crop_resize(s.bytes.data(), s.bytes.size(), s.geometry.rect, out_size, out_size, s.geometry.flip,
                                 host, cpu_scratch);
      } catch (const std::exception& e) {  // DecodeError, or a crop outside what libjpeg reads (invalid_argument)
        reasons[i] += (reasons[i].empty() ? "" : "; ") + std::string("libjpeg: ") + e.what();
        continue;
      }
      RN50_CUDA_CHECK(
          cudaMemcpyAsync(base + offsets[i], host, image_bytes, cudaMemcpyHostToDevice, decode_stream.stream()));
      plans[i] = input::plan_identity(out_size);
      decoded[i] = true;
      ++job_counts.cpu_fallback;
    }
  }

  void submit(const data::HostBatch& batch, const BadDecodeHandler& on_bad, const ReleaseBatch& release) {
    check_batch(batch);
    pipeline->submit(Job{batch, on_bad, release});
  }

  // The decode thread's counts of its last batch into `counts`.
  void add_job_counts() {
    std::lock_guard<std::mutex> lock(counts_mutex);
    GpuDecodeCounts& c = job_counts;
    counts.hardware += c.hardware;
    counts.hybrid += c.hybrid;
    counts.cpu_fallback += c.cpu_fallback;
    counts.bad += c.bad;
    counts.host_s += c.host_s;
    counts.wait_s += c.wait_s;
    counts.route_s += c.route_s;
    counts.hardware_call_s += c.hardware_call_s;
    counts.slowest_hardware_call_s = std::max(counts.slowest_hardware_call_s, c.slowest_hardware_call_s);
    job_counts = {};
  }

  // On the decode thread: batch `number` into `slot`. On an exception nothing of the batch is held (the pipeline
  // hands it back).
  void decode_job(const Job& job, Slot& slot, uint64_t number) {
    const auto started = std::chrono::steady_clock::now();
    wait_in_call = 0;
    c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(device));
    slot.sequence = number;
    nvjpeg_memory.set_batch(number);
    try {
      queue_decode(job.batch, slot, job.on_bad);
    } catch (...) {
      // Work may be queued into this slot's memory, which the next batch reuses at once: let it finish first.
      cudaStreamSynchronize(decode_stream.stream());
      cudaStreamSynchronize(hybrid_stream.stream());
      throw;
    }
    slot.in_flight = job.batch;
    slot.release = job.release;
    job_counts.host_s += seconds_since(started) - wait_in_call;
  }

  static double seconds_since(std::chrono::steady_clock::time_point start) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }

  // decode_job's work for `slot`: route, decode, replace what failed, fill the kernel's table and the labels,
  // and record decode_done.
  void queue_decode(const data::HostBatch& batch, Slot& slot, const BadDecodeHandler& on_bad) {
    const int n = static_cast<int>(batch.size);
    routes.assign(n, Route::kCpu);
    offsets.assign(n, 0);
    plans.assign(n, input::ResamplePlan{});
    decoded.assign(n, false);
    reasons.assign(n, std::string());
    timed(job_counts.route_s, [&] {
      layouts.assign(n, ChromaLayout{});
      for (int i = 0; i < n; ++i) routes[i] = route_of(batch.encoded[i], layouts[i]);
    });
    size_t total = 0;
    for (int i = 0; i < n; ++i) {
      const data::EncodedSample& s = batch.encoded[i];
      offsets[i] = total;
      // Room for the whole image, or for libjpeg's finished one if nvJPEG fails later.
      const size_t whole = static_cast<size_t>(s.info.width) * static_cast<size_t>(s.info.height) * 3;
      total += aligned(std::max(whole, static_cast<size_t>(out_size) * out_size * 3));
      if (routes[i] != Route::kCpu) plans[i] = input::plan_resample(s.info.width, s.info.height, s.geometry, out_size);
    }
    uint8_t* base = slot.decoded.reserve(std::max<size_t>(total, 1), device, decode_stream.stream());
    RN50_CUDA_CHECK(cudaEventRecord(slot.decode_started.get(), decode_stream.stream()));

    // The default backend first, then the hardware batch, then the default backend again for what that failed.
    decode_hybrid(batch, base);
    decode_hardware(batch, slot, base);
    decode_hybrid(batch, base);
    decode_cpu(batch, slot, base);

    // What nothing decoded: reported (strict mode stops here), then replaced as the loader replaces bad files.
    for (int i = 0; i < n; ++i) {
      if (decoded[i]) continue;
      ++job_counts.bad;
      if (on_bad) on_bad(batch.encoded[i].index, reasons[i]);
    }
    const std::vector<int> sources = data::replacement_sources(decoded);
    auto* jobs = static_cast<kernels::ResampleJob*>(slot.jobs_host.get());
    for (int i = 0; i < n; ++i) {
      const int from = sources[i];
      jobs[i] = kernels::ResampleJob{base + offsets[from], plans[from]};
      if (from != i) batch.labels[i] = batch.labels[from];
    }
    // Pinned, so that finish_into's copy does not wait for the compute stream as one from pageable memory would.
    std::copy(batch.labels, batch.labels + n, static_cast<int64_t*>(slot.labels_host.get()));
    RN50_CUDA_CHECK(cudaEventRecord(slot.decode_done.get(), decode_stream.stream()));
  }

  void finish_into(at::Tensor& images, at::Tensor& labels) {
    const auto ready_start = std::chrono::steady_clock::now();
    int index = 0;
    try {
      index = pipeline->wait_decoded();
    } catch (...) {
      add_seconds(counts.batch_wait_s, seconds_since(ready_start));
      throw;
    }
    add_seconds(counts.batch_wait_s, seconds_since(ready_start));
    Slot& slot = slots[index];
    const int count = static_cast<int>(slot.in_flight->size);
    check_outputs(count, images, labels);  // a bad tensor leaves the batch for a finish_into with good ones

    c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(device));
    const cudaStream_t compute = at::cuda::getCurrentCUDAStream().stream();
    // The host at most two steps ahead of the device: a batch's nvJPEG call can last until the device has run
    // everything queued before it (bench/results/2026-11-30-h200-g.md), so the step queued before that call
    // must not be the last one the device has to run.
    const auto pace_start = std::chrono::steady_clock::now();
    RN50_CUDA_CHECK(cudaEventSynchronize(previous_finish_queued.get()));
    add_seconds(counts.pace_wait_s, seconds_since(pace_start));
    const auto started = std::chrono::steady_clock::now();
    RN50_CUDA_CHECK(cudaEventRecord(previous_finish_queued.get(), compute));
    const size_t n = static_cast<size_t>(count);
    RN50_CUDA_CHECK(cudaEventRecord(slot.input_wanted.get(), compute));
    RN50_CUDA_CHECK(cudaStreamWaitEvent(compute, slot.decode_done.get(), 0));
    RN50_CUDA_CHECK(cudaEventRecord(slot.kernel_started.get(), compute));
    RN50_CUDA_CHECK(cudaMemcpyAsync(slot.jobs_device.data_ptr(), slot.jobs_host.get(),
                                    sizeof(kernels::ResampleJob) * n, cudaMemcpyHostToDevice, compute));
    kernels::crop_resize_normalize(static_cast<const kernels::ResampleJob*>(slot.jobs_device.data_ptr()), count,
                                   out_size, images.data_ptr(), output_type(images), is_channels_last(images),
                                   norm.scale, norm.shift, compute);
    RN50_CUDA_CHECK(cudaMemcpyAsync(labels.data_ptr(), slot.labels_host.get(), sizeof(int64_t) * n,
                                    cudaMemcpyHostToDevice, compute));
    RN50_CUDA_CHECK(cudaEventRecord(slot.kernel_done.get(), compute));
    pipeline->mark_finished(index);
    add_seconds(counts.host_s, seconds_since(started));
  }

  // Adds to one of `counts`' seconds from the caller's thread.
  void add_seconds(double& total, double seconds) {
    std::lock_guard<std::mutex> lock(counts_mutex);
    total += seconds;
  }

  bool holds_submitted() { return pipeline->holds_submitted(); }

  // Every finished batch back once the device has read it. A batch submitted and not yet finished stays for the
  // next finish_into: the next epoch's first batches, decoding while this epoch's last steps train.
  void drain() { pipeline->drain(); }

  // After an error: drops the batches not yet decoded, waits for the decode thread and the device, and forgets
  // every batch held, handing none back (their loader may be gone).
  void abandon() {
    pipeline->abandon([this](int index, bool finished) {
      Slot& slot = slots[index];
      if (finished) cudaEventSynchronize(slot.kernel_done.get());
      slot.in_flight.reset();
      slot.release = nullptr;
    });
    cudaStreamSynchronize(decode_stream.stream());
    cudaStreamSynchronize(hybrid_stream.stream());
  }

  void check_batch(const data::HostBatch& batch) const {
    if (batch.encoded == nullptr) throw std::invalid_argument("GpuJpegDecoder: the batch holds no encoded samples");
    if (batch.size < 1 || batch.size > max_batch)
      throw std::invalid_argument("GpuJpegDecoder: batch of " + std::to_string(batch.size) + " samples, at most " +
                                  std::to_string(max_batch) + " allowed");
  }

  void check_outputs(int n, const at::Tensor& images, const at::Tensor& labels) const {
    TORCH_CHECK(images.is_cuda() && images.device().index() == device && images.dim() == 4 && images.size(0) == n &&
                    images.size(1) == 3 && images.size(2) == out_size && images.size(3) == out_size,
                "GpuJpegDecoder: images must be [", n, ", 3, ", out_size, ", ", out_size, "] on cuda:", device);
    TORCH_CHECK(images.is_contiguous() || images.is_contiguous(at::MemoryFormat::ChannelsLast),
                "GpuJpegDecoder: images must be NCHW or channels-last contiguous");
    TORCH_CHECK(labels.is_cuda() && labels.scalar_type() == at::kLong && labels.is_contiguous() && labels.numel() == n,
                "GpuJpegDecoder: labels must be int64 [", n, "] on the device");
    output_type(images);  // throws for a dtype the kernel does not write
  }

  static bool is_channels_last(const at::Tensor& images) {
    return !images.is_contiguous() && images.is_contiguous(at::MemoryFormat::ChannelsLast);
  }

  static cuda::kernels::OutType output_type(const at::Tensor& images) {
    switch (images.scalar_type()) {
      case at::kFloat:
        return cuda::kernels::OutType::F32;
      case at::kHalf:
        return cuda::kernels::OutType::F16;
      case at::kBFloat16:
        return cuda::kernels::OutType::BF16;
      default:
        throw std::invalid_argument("GpuJpegDecoder: images must be float, half or bfloat16");
    }
  }

  std::string describe() const {
    int major = 0, minor = 0;
    nvjpegGetProperty(MAJOR_VERSION, &major);
    nvjpegGetProperty(MINOR_VERSION, &minor);
    std::string text = "nvJPEG " + std::to_string(major) + "." + std::to_string(minor) + ": ";
    if (hardware) {
      text += "hardware decoder" +
              (hardware_engines > 0 ? " (" + std::to_string(hardware_engines) + " engines)" : std::string()) +
              " where it accepts the image, default backend for the rest";
    } else {
      text += "default backend for all (no hardware decoder: " + hardware_status + ")";
    }
    text += ", libjpeg for what nvJPEG refuses; ";
    text += interpolated_chroma ? "chroma upsampling with interpolation" : "nvJPEG's default chroma upsampling";
    text += kOwnAllocators ? "; nvJPEG's memory reused after each batch" : "; nvJPEG's own cudaMalloc/cudaFree";
    if (no_pipeline) text += "; hardware decoder without pipelining (NVJPEG_FLAGS_HW_DECODE_NO_PIPELINE)";
    if (planar) text += "; the hardware decoder's YCbCr planes converted to RGB in the crop kernel (libjpeg's upsampling)";
    return text;
  }
};

GpuJpegDecoder::GpuJpegDecoder(int device, int max_batch, int out_size, const GpuDecoderOptions& options)
    : impl_(std::make_unique<Impl>(device, max_batch, out_size, options)) {}

GpuJpegDecoder::~GpuJpegDecoder() = default;

void GpuJpegDecoder::submit(const data::HostBatch& batch, const BadDecodeHandler& on_bad,
                            const ReleaseBatch& release) {
  impl_->submit(batch, on_bad, release);
}

void GpuJpegDecoder::finish_into(at::Tensor& images, at::Tensor& labels) { impl_->finish_into(images, labels); }

void GpuJpegDecoder::decode_into(const data::HostBatch& batch, at::Tensor& images, at::Tensor& labels,
                                 const BadDecodeHandler& on_bad, const ReleaseBatch& release) {
  // Refused before any work: a batch left submitted would be finished into the next call's tensors.
  if (impl_->holds_submitted())
    throw std::logic_error("GpuJpegDecoder: decode_into while a submitted batch waits for finish_into");
  impl_->check_outputs(static_cast<int>(batch.size), images, labels);
  impl_->submit(batch, on_bad, release);
  impl_->finish_into(images, labels);
}

void GpuJpegDecoder::drain() { impl_->drain(); }

void GpuJpegDecoder::abandon() { impl_->abandon(); }

GpuDecodeCounts GpuJpegDecoder::take_counts() {
  std::lock_guard<std::mutex> lock(impl_->counts_mutex);
  GpuDecodeCounts out = impl_->counts;
  const uint64_t allocations = impl_->nvjpeg_memory.raw_allocations();
  out.new_buffers = static_cast<int64_t>(allocations - impl_->allocations_counted);
  impl_->allocations_counted = allocations;
  impl_->counts = {};
  return out;
}

std::string GpuJpegDecoder::describe() const { return impl_->describe(); }

}  // namespace rn50::input
