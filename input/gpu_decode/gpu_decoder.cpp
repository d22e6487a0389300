// input/gpu_decode/gpu_decoder.cpp: GpuJpegDecoder on nvJPEG (built only when CMake found it). On the decoder's own
// thread (input/gpu_decode/decode_pipeline.h), per batch: route each sample (gpu_decoder_routes.cpp), decode into one
// of N+1 reusable device buffers (N: the batches submitted ahead) on the decode stream, plan, and replace what failed;
// on the caller's thread, the crop-resize-normalise kernel on the current stream.
#include "input/gpu_decode/gpu_decoder.h"

#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <nvjpeg.h>

#include <algorithm>
#include <cstdint>
#include <exception>
#include <mutex>
#include <stdexcept>
#include <utility>
#include <vector>

#include "core/errors.h"
#include "cuda/cuda_check.h"
#include "input/gpu_decode/crop_resize_kernel.h"
#include "input/gpu_decode/gpu_decoder_impl.h"
#include "input/gpu_decode/nvjpeg_check.h"

namespace rn50::input {

bool built_with_nvjpeg() { return true; }

GpuJpegDecoder::Impl::Impl(int device_in, int max_batch_in, int out_size_in, const GpuDecoderOptions& options)
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
  scratch.reserve(max_batch);
  previous_finish_queued = make_timing_event();
  pipeline = std::make_unique<DecodePipeline<Job>>(static_cast<int>(slots.size()), pipeline_work());
}

// What the pipeline's decode thread does with nvJPEG and CUDA.
DecodePipeline<GpuJpegDecoder::Impl::Job>::Work GpuJpegDecoder::Impl::pipeline_work() {
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
    cudaGetLastError();                                                                   // not an error
    return false;
  };
  work.retire = [this](int slot) { retire(slots[slot]); };
  return work;
}

// Queued work still writes the buffers about to be freed. No release here: the loader may be gone.
GpuJpegDecoder::Impl::~Impl() {
  abandon();
  pipeline.reset();  // joins the decode thread before the members it uses go
}

// Waits for the device to be done with the slot's batch and hands the batch back; its waits and device times go
// to `counts`. Outside the pipeline's lock, on the decode thread or in drain(). The host batch goes back once the
// slot's kernel is done: the device reads only the images the loader decoded (decode_cpu_share), copied before that
// kernel. It goes back when the wait fails too: a failed wait is a dead context, which runs no more copies, so its
// loader may refill it whatever happened on the device.
void GpuJpegDecoder::Impl::retire(Slot& slot) {
  const data::HostBatch batch = *slot.in_flight;
  slot.in_flight.reset();
  const ReleaseBatch release = std::exchange(slot.release, nullptr);
  GpuDecodeCounts times;
  std::exception_ptr error;
  try {
    const auto wait_start = Clock::now();
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

void GpuJpegDecoder::Impl::add_device_times(const GpuDecodeCounts& times) {
  std::lock_guard<std::mutex> lock(counts_mutex);
  counts.wait_s += times.wait_s;
  counts.device_batches += times.device_batches;
  counts.decode_latency_s += times.decode_latency_s;
  counts.input_stall_s += times.input_stall_s;
  counts.crop_s += times.crop_s;
}

void GpuJpegDecoder::Impl::submit(const data::HostBatch& batch, const BadDecodeHandler& on_bad,
                                  const ReleaseBatch& release) {
  check_batch(batch);
  pipeline->submit(Job{batch, on_bad, release});
}

// The decode thread's counts of its last batch into `counts`.
void GpuJpegDecoder::Impl::add_job_counts() {
  std::lock_guard<std::mutex> lock(counts_mutex);
  counts.add(job_counts);
  job_counts = {};
}

// On the decode thread: batch `number` into `slot`. On an exception nothing of the batch is held (the pipeline
// hands it back).
void GpuJpegDecoder::Impl::decode_job(const Job& job, Slot& slot, uint64_t number) {
  const auto started = Clock::now();
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

// decode_job's work for `slot`: route, decode, replace what failed, fill the kernel's table and the labels,
// and record decode_done.
void GpuJpegDecoder::Impl::queue_decode(const data::HostBatch& batch, Slot& slot, const BadDecodeHandler& on_bad) {
  const int n = static_cast<int>(batch.size);
  scratch.routes.assign(n, Route::kCpu);
  scratch.offsets.assign(n, 0);
  scratch.plans.assign(n, input::ResamplePlan{});
  scratch.decoded.assign(n, false);
  scratch.reasons.assign(n, std::string());
  timed(job_counts.route_s, [&] {
    scratch.layouts.assign(n, ChromaLayout{});
    for (int i = 0; i < n; ++i) {
      const data::EncodedSample& s = batch.encoded[i];
      scratch.routes[i] = s.skipped      ? Route::kSkipped
                          : s.predecoded ? Route::kPredecoded
                                         : route_of(s, scratch.layouts[i]);
    }
  });
  const size_t finished = static_cast<size_t>(out_size) * out_size * 3;
  size_t total = 0;
  for (int i = 0; i < n; ++i) {
    const data::EncodedSample& s = batch.encoded[i];
    scratch.offsets[i] = total;
    if (scratch.routes[i] == Route::kPredecoded || scratch.routes[i] == Route::kSkipped) {
      total += aligned(finished);
      scratch.plans[i] = input::plan_identity(out_size);
      continue;
    }
    // Room for the whole image, or for libjpeg's finished one if nvJPEG fails later.
    const size_t whole = static_cast<size_t>(s.info.width) * static_cast<size_t>(s.info.height) * 3;
    total += aligned(std::max(whole, finished));
    if (scratch.routes[i] != Route::kCpu)
      scratch.plans[i] = input::plan_resample(s.info.width, s.info.height, s.geometry, out_size);
  }
  uint8_t* base = slot.decoded.reserve(std::max<size_t>(total, 1), device, decode_stream.stream());
  RN50_CUDA_CHECK(cudaEventRecord(slot.decode_started.get(), decode_stream.stream()));

  // The loader's finished images first (copies only), then the default backend, the hardware batch, and the
  // default backend again for what that failed.
  upload_predecoded(batch, base);
  decode_hybrid(batch, base);
  decode_hardware(batch, slot, base);
  decode_hybrid(batch, base);
  decode_cpu(batch, slot, base);

  // What nothing decoded: reported (strict mode stops here; the loader reported what it skipped), then replaced as
  // the loader replaces bad files, or under skip_bad labelled kSkippedLabel over another position's pixels (or, when
  // none decoded, its own room's: ignored either way).
  bool any_decoded = false;
  for (int i = 0; i < n; ++i) {
    any_decoded = any_decoded || scratch.decoded[i];
    if (scratch.decoded[i] || scratch.routes[i] == Route::kSkipped) continue;
    ++job_counts.bad;
    if (on_bad) on_bad(batch.encoded[i].index, scratch.reasons[i]);
  }
  auto* jobs = static_cast<kernels::ResampleJob*>(slot.jobs_host.get());
  if (batch.skip_bad && !any_decoded) {
    for (int i = 0; i < n; ++i) {
      jobs[i] = kernels::ResampleJob{base + scratch.offsets[i], input::plan_identity(out_size)};
      batch.labels[i] = data::kSkippedLabel;
    }
  } else {
    const std::vector<int> sources = data::replacement_sources(scratch.decoded);
    for (int i = 0; i < n; ++i) {
      const int from = sources[i];
      jobs[i] = kernels::ResampleJob{base + scratch.offsets[from], scratch.plans[from]};
      if (from != i) batch.labels[i] = batch.skip_bad ? data::kSkippedLabel : batch.labels[from];
    }
  }
  // Pinned, so that finish_into's copy does not wait for the compute stream as one from pageable memory would.
  std::copy(batch.labels, batch.labels + n, static_cast<int64_t*>(slot.labels_host.get()));
  RN50_CUDA_CHECK(cudaEventRecord(slot.decode_done.get(), decode_stream.stream()));
}

void GpuJpegDecoder::Impl::finish_into(at::Tensor& images, at::Tensor& labels) {
  const auto ready_start = Clock::now();
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
  // everything queued before it, so the step queued before that call must not be the last one the device has to
  // run.
  const auto pace_start = Clock::now();
  RN50_CUDA_CHECK(cudaEventSynchronize(previous_finish_queued.get()));
  add_seconds(counts.pace_wait_s, seconds_since(pace_start));
  const auto started = Clock::now();
  RN50_CUDA_CHECK(cudaEventRecord(previous_finish_queued.get(), compute));
  const size_t n = static_cast<size_t>(count);
  RN50_CUDA_CHECK(cudaEventRecord(slot.input_wanted.get(), compute));
  RN50_CUDA_CHECK(cudaStreamWaitEvent(compute, slot.decode_done.get(), 0));
  RN50_CUDA_CHECK(cudaEventRecord(slot.kernel_started.get(), compute));
  RN50_CUDA_CHECK(cudaMemcpyAsync(slot.jobs_device.data_ptr(), slot.jobs_host.get(), sizeof(kernels::ResampleJob) * n,
                                  cudaMemcpyHostToDevice, compute));
  kernels::crop_resize_normalize(static_cast<const kernels::ResampleJob*>(slot.jobs_device.data_ptr()), count, out_size,
                                 images.data_ptr(), output_type(images), static_cast<int>(images.size(1)),
                                 is_channels_last(images), norm.scale, norm.shift, compute);
  RN50_CUDA_CHECK(
      cudaMemcpyAsync(labels.data_ptr(), slot.labels_host.get(), sizeof(int64_t) * n, cudaMemcpyHostToDevice, compute));
  RN50_CUDA_CHECK(cudaEventRecord(slot.kernel_done.get(), compute));
  pipeline->mark_finished(index);
  add_seconds(counts.host_s, seconds_since(started));
}

// Adds to one of `counts`' seconds from the caller's thread.
void GpuJpegDecoder::Impl::add_seconds(double& total, double seconds) {
  std::lock_guard<std::mutex> lock(counts_mutex);
  total += seconds;
}

// After an error: drops the batches not yet decoded, waits for the decode thread and the device, and forgets
// every batch held, handing none back (their loader may be gone).
void GpuJpegDecoder::Impl::abandon() {
  pipeline->abandon([this](int index, bool finished) {
    Slot& slot = slots[index];
    if (finished) cudaEventSynchronize(slot.kernel_done.get());
    slot.in_flight.reset();
    slot.release = nullptr;
  });
  cudaStreamSynchronize(decode_stream.stream());
  cudaStreamSynchronize(hybrid_stream.stream());
}

void GpuJpegDecoder::Impl::check_batch(const data::HostBatch& batch) const {
  if (batch.encoded == nullptr) throw std::invalid_argument("GpuJpegDecoder: the batch holds no encoded samples");
  if (batch.size < 1 || batch.size > max_batch)
    throw std::invalid_argument("GpuJpegDecoder: batch of " + std::to_string(batch.size) + " samples, at most " +
                                std::to_string(max_batch) + " allowed");
}

void GpuJpegDecoder::Impl::check_outputs(int n, const at::Tensor& images, const at::Tensor& labels) const {
  TORCH_CHECK(images.is_cuda() && images.device().index() == device && images.dim() == 4 && images.size(0) == n &&
                  images.size(1) >= 3 && images.size(1) <= 8 && images.size(2) == out_size &&
                  images.size(3) == out_size,
              "GpuJpegDecoder: images must be [", n, ", C, ", out_size, ", ", out_size,
              "] with C from 3 to 8 on cuda:", device);
  TORCH_CHECK(images.is_contiguous() || images.is_contiguous(at::MemoryFormat::ChannelsLast),
              "GpuJpegDecoder: images must be NCHW or channels-last contiguous");
  TORCH_CHECK(labels.is_cuda() && labels.scalar_type() == at::kLong && labels.is_contiguous() && labels.numel() == n,
              "GpuJpegDecoder: labels must be int64 [", n, "] on the device");
  output_type(images);  // throws for a dtype the kernel does not write
}

bool GpuJpegDecoder::Impl::is_channels_last(const at::Tensor& images) {
  return !images.is_contiguous() && images.is_contiguous(at::MemoryFormat::ChannelsLast);
}

cuda::kernels::OutType GpuJpegDecoder::Impl::output_type(const at::Tensor& images) {
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

std::string GpuJpegDecoder::Impl::describe() const {
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
  if (planar)
    text += "; the hardware decoder's YCbCr planes converted to RGB in the crop kernel (libjpeg's upsampling)";
  return text;
}

GpuJpegDecoder::GpuJpegDecoder(int device, int max_batch, int out_size, const GpuDecoderOptions& options)
    : impl_(std::make_unique<Impl>(device, max_batch, out_size, options)) {}

GpuJpegDecoder::~GpuJpegDecoder() = default;

void GpuJpegDecoder::submit(const data::HostBatch& batch, const BadDecodeHandler& on_bad, const ReleaseBatch& release) {
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

uint64_t GpuJpegDecoder::finished_batches() { return impl_->finished_batches(); }

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
