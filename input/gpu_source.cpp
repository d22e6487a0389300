// input/gpu_source.cpp: decode: gpu: the loader's threads only read files and headers into host pools; nvJPEG
// decodes each batch on the device and one kernel crops, flips and normalises it into the step's input. Batches are
// handed to the decoder's thread decode_ahead_batches steps ahead, the next epoch's first ones during this epoch's
// last steps (docs/gpu-decoding.md).
#include "input/sources.h"

#include <ATen/ATen.h>

#include <cstdlib>
#include <exception>
#include <memory>
#include <optional>
#include <stdexcept>
#include <utility>
#include <vector>

#include "core/clock.h"
#include "core/errors.h"
#include "core/log.h"
#include "cuda/cuda_support.h"
#include "input/folder_data.h"
#include "input/gpu_decode/decoder_group.h"
#include "input/gpu_decode/gpu_decoder.h"

namespace rn50::input {
namespace {

using Decoders = DecoderGroup<GpuJpegDecoder>;

// On an exception out of a validation, the decoder forgets the batches it holds instead of handing them back later:
// their loader goes as the exception unwinds. Declared after the loader, so destroyed before it.
class AbandonDecodesOnError {
 public:
  explicit AbandonDecodesOnError(Decoders& decoder)
      : decoder_(decoder), exceptions_(std::uncaught_exceptions()) {}
  ~AbandonDecodesOnError() {
    if (std::uncaught_exceptions() > exceptions_) decoder_.abandon();
  }
  AbandonDecodesOnError(const AbandonDecodesOnError&) = delete;
  AbandonDecodesOnError& operator=(const AbandonDecodesOnError&) = delete;

 private:
  Decoders& decoder_;
  int exceptions_;
};

// Hands a host batch back to `loader` once the device no longer reads it.
ReleaseBatch release_to(data::BatchLoader& loader) {
  return [&loader](const data::HostBatch& b) { loader.release(b); };
}

class GpuDecodeSource final : public InputSource {
 public:
  GpuDecodeSource(const InputOptions& options, const InputContext& context)
      : options_(options), context_(context), data_(options, context), ahead_(options.decode_ahead) {
    info_ = data_.info();
    const std::shared_ptr<HostAllocator> host = data_.host_allocator();
    GpuDecoderOptions decoder;
    decoder.planar = options.decode_yuv;
    decoder.submit_ahead = options.decode_ahead_batches;
    // Each decoder holds up to held_batches of a pool's batches (their labels are copied from the pool).
    const int slots = options.prefetch + options.gpu_decoders * GpuJpegDecoder::held_batches(decoder);
    auto pool = [&] {
      // With a CPU share the decode threads write some finished images into the pool's pixel room, which the
      // device copies from: pinned even with pin_memory off, since a copy from pageable memory would hold the decode
      // thread until the stream's earlier work is done.
      const bool share = options.decode_cpu_share.mode != data::CpuDecodeShare::Mode::kOff;
      return std::make_unique<data::BatchPool>(
          slots, options.batch_size, options.image_size, share ? cuda::make_pinned_allocator() : host,
          share ? data::BatchContent::kEncodedWithPixels : data::BatchContent::kEncoded);
    };
    train_pool_ = pool();
    if (info_.val_images > 0) val_pool_ = pool();
    // The next epoch's first batches come from a loader of their own, which needs a pool of its own (a loader fills
    // every slot of its pool). Not across a validation, which decodes through the same slots.
    if (ahead_ && options.epochs > 1 && info_.val_images == 0) ahead_pool_ = pool();
    std::vector<std::unique_ptr<GpuJpegDecoder>> decoders;
    for (int i = 0; i < options.gpu_decoders; ++i)
      decoders.push_back(
          std::make_unique<GpuJpegDecoder>(context.device.index(), options.batch_size, options.image_size, decoder));
    decoder_ = std::make_unique<Decoders>(std::move(decoders));
  }

  std::vector<std::pair<std::string, std::string>> describe() const override {
    const char* queues = std::getenv("CUDA_DEVICE_MAX_CONNECTIONS");
    const data::CpuDecodeShare& share = options_.decode_cpu_share;
    const std::string cpu_share =
        share.mode == data::CpuDecodeShare::Mode::kAuto
            ? strprintf("automatic: %d decode threads decode images while %d batches wait, else only read files",
                        options_.workers, share.ready_batches)
        : share.mode == data::CpuDecodeShare::Mode::kFixed
            ? strprintf("%.3g of each batch decoded by the %d decode threads", share.fraction, options_.workers)
            : std::string("none: the decode threads only read files");
    return {{"(decode)", decoder_->describe()},
            {"(decode cpu share)", cpu_share},
            {"(cuda hardware queues)", queues ? queues : "CUDA's default (8)"},
            data_.describe_decode_budget(),
            {"(train images)", std::to_string(info_.train_images)}};
  }

  void begin_epoch(int64_t epoch, int64_t first_step) override {
    epoch_ = epoch;
    step_ = first_step;
    wait_s_ = 0;
    submitted_ = first_step;
    // Made during the previous epoch's last steps, its first batches submitted then: its pool becomes the train pool.
    // (A resumed epoch's first step follows no epoch of this process: there is no such loader then.)
    if (next_epoch_loader_ && first_step == 0) {
      loader_ = std::move(next_epoch_loader_);
      submitted_ = next_epoch_submitted_;
      std::swap(train_pool_, ahead_pool_);
    }
    next_epoch_submitted_ = 0;
    next_epoch_ahead_failed_ = false;
    if (!loader_) loader_ = data_.train_loader(epoch, *train_pool_, first_step);
    // No reset of the decoder's counts here: its thread may have decoded one of this epoch's first batches since the
    // last record (validation takes its own counts).
  }

  void fill(at::Tensor& images, at::Tensor& labels) override {
    if (ahead_) {
      // An epoch's start: its first N batches (fewer when the last epoch's steps submitted some).
      for (; submitted_ < info_.steps_per_epoch && submitted_ < step_ + options_.decode_ahead_batches; ++submitted_)
        submit(*loader_);
      decoder_->finish_into(images, labels);  // batch s, submitted during step s - N
    } else {
      const auto wait_start = Clock::now();
      const std::optional<data::HostBatch> batch = loader_->next();
      wait_s_ += seconds_since(wait_start);
      decoder_->decode_into(*batch, images, labels, on_bad(data_.train()), release_to(*loader_));
    }
    ++step_;
  }

  void after_step() override {
    if (!ahead_) return;
    // Batch s+N, N steps ahead of its use, handed to the decode thread once step s is queued: while one of nvJPEG's
    // slow calls waits for the device to run the steps queued before it, batches s+1 .. s+N-1 are decoded already.
    if (submitted_ < info_.steps_per_epoch) {
      submit(*loader_);
      ++submitted_;
    } else if (ahead_pool_ && epoch_ + 1 < options_.epochs) {
      // Else the next epoch would start with the device idle for a whole decode. Their loader waits count in this
      // epoch, their routes in the epoch during which the decode thread decodes them.
      submit_next_epochs_batch(epoch_ + 1);
    }
  }

  InputCounts end_epoch() override {
    decoder_->drain();  // the loader, which owns the batches it holds, goes next (up to N of the next epoch's stay)
    InputCounts counts;
    counts.wait_s = wait_s_;
    counts.bad_samples = loader_->bad_samples();
    add_decode_counts(counts);
    loader_.reset();
    return counts;
  }

  void abandon() override { decoder_->abandon(); }

  InputCounts validate(const EvalBatch& eval) override {
    const std::unique_ptr<data::BatchLoader> loader = data_.val_loader(*val_pool_);
    const AbandonDecodesOnError abandon_on_error(*decoder_);
    while (const std::optional<data::HostBatch> batch = loader->next()) {
      at::Tensor x = at::empty({batch->size, context_.image_channels, options_.image_size, options_.image_size},
                               at::TensorOptions(context_.device).dtype(context_.image_dtype),
                               context_.channels_last ? at::MemoryFormat::ChannelsLast : at::MemoryFormat::Contiguous);
      at::Tensor y = at::empty({batch->size}, at::TensorOptions(context_.device).dtype(at::kLong));
      decoder_->decode_into(*batch, x, y, on_bad(data_.val()), release_to(*loader));
      eval(x, y);
    }
    decoder_->drain();
    InputCounts counts;
    counts.bad_samples = loader->bad_samples() + decoder_->take_counts().bad;
    return counts;
  }

 private:
  // A sample of `dataset` the GPU could not decode although its header was fine: counted and replaced like the
  // loader's bad samples, or the end of the run under strict_data.
  BadDecodeHandler on_bad(const data::ImageDataset& dataset) const {
    return [this, &dataset](size_t index, const std::string& reason) {
      if (options_.strict_data)
        throw DecodeError("bad sample (strict mode): " + dataset.describe(index) + ": " + reason);
      FolderData::report_bad_sample(dataset.describe(index), reason);
    };
  }

  // The next batch from `loader`, handed to the decoder (finish_into makes it later).
  void submit(data::BatchLoader& loader) {
    const auto wait_start = Clock::now();
    const std::optional<data::HostBatch> batch = loader.next();
    wait_s_ += seconds_since(wait_start);
    if (!batch) throw std::logic_error("decode: gpu: the loader ran out of batches before the epoch's last step");
    try {
      decoder_->submit(*batch, on_bad(data_.train()), release_to(loader));
    } catch (...) {
      loader.release(*batch);  // not the decoder's: back to the loader, or the epoch would skip it
      throw;
    }
  }

  // One of the next epoch's first batches, during one of this epoch's last steps; the first makes its loader. A read
  // error (a bad file under strict_data) must not cost this epoch its record and checkpoint: it stops the submits
  // ahead, and the next epoch reads on from its loader at its start and meets the error there.
  void submit_next_epochs_batch(int64_t next_epoch) {
    if (next_epoch_ahead_failed_ ||
        next_epoch_submitted_ >= std::min<int64_t>(options_.decode_ahead_batches, info_.steps_per_epoch))
      return;
    try {
      if (!next_epoch_loader_) next_epoch_loader_ = data_.train_loader(next_epoch, *ahead_pool_);
      submit(*next_epoch_loader_);
      ++next_epoch_submitted_;
    } catch (const std::exception& e) {
      next_epoch_ahead_failed_ = true;
      if (next_epoch_submitted_ == 0) next_epoch_loader_.reset();  // the decoder holds nothing of it
      log_warn(std::string("the next epoch's first batches, decoded ahead, stopped (read again at its start): ") +
               first_line(e.what()));
    }
  }

  // The epoch's images per decode route; what nothing decoded joins the bad samples.
  void add_decode_counts(InputCounts& out) {
    const GpuDecodeCounts c = decoder_->take_counts();
    auto add = [&](const char* name, double value) { out.extra.emplace_back(name, value); };
    add("gpu_decode_hardware", static_cast<double>(c.hardware));
    add("gpu_decode_hybrid", static_cast<double>(c.hybrid));
    add("gpu_decode_cpu_fallback", static_cast<double>(c.cpu_fallback));
    add("gpu_decode_loader_cpu", static_cast<double>(c.loader_cpu));
    // The decoder's host work (mostly on its own thread) and its thread's waits for the device; the training
    // thread's waits in finish_into for a batch's decode and for the device.
    add("gpu_decode_host_s", c.host_s);
    add("gpu_decode_wait_s", c.wait_s);
    add("gpu_decode_batch_wait_s", c.batch_wait_s);
    add("gpu_decode_pace_wait_s", c.pace_wait_s);
    // Parts of host_s: choosing routes (nvJPEG parses each header), and nvJPEG's batched hardware calls.
    add("gpu_decode_route_s", c.route_s);
    add("gpu_decode_hardware_call_s", c.hardware_call_s);
    add("gpu_decode_slowest_hardware_call_s", c.slowest_hardware_call_s);
    // From CUDA events: each batch from submit to ready (nvJPEG's host calls included), the compute stream waiting
    // for a decode before making the input, and the crop kernel.
    add("gpu_decode_latency_s", c.decode_latency_s);
    add("gpu_decode_stall_s", c.input_stall_s);
    add("gpu_decode_crop_s", c.crop_s);
    add("gpu_decode_new_buffers", static_cast<double>(c.new_buffers));
    out.bad_samples += c.bad;
    if (c.hybrid + c.cpu_fallback + c.bad + c.loader_cpu > 0) {
      const int64_t all = c.hardware + c.hybrid + c.cpu_fallback + c.loader_cpu;
      const std::string share =
          c.loader_cpu > 0
              ? strprintf(", %lld (%.1f%%) by the decode threads (decode_cpu_share)",
                          static_cast<long long>(c.loader_cpu),
                          all > 0 ? 100.0 * static_cast<double>(c.loader_cpu) / static_cast<double>(all) : 0.0)
              : std::string();
      log_info(strprintf("gpu decode: %lld images on the hardware decoder, %lld on nvJPEG's default backend, %lld by "
                         "libjpeg, %lld undecodable",
                         static_cast<long long>(c.hardware), static_cast<long long>(c.hybrid),
                         static_cast<long long>(c.cpu_fallback), static_cast<long long>(c.bad)) +
               share);
    }
  }

  const InputOptions options_;
  InputContext context_;
  FolderData data_;
  const bool ahead_;  // decode_ahead: batches submitted decode_ahead_batches steps before their use
  std::unique_ptr<data::BatchPool> train_pool_, val_pool_;
  std::unique_ptr<data::BatchPool> ahead_pool_;           // the next epoch's loader fills it (null: no such loader)
  std::unique_ptr<data::BatchLoader> loader_;             // this epoch's
  std::unique_ptr<data::BatchLoader> next_epoch_loader_;  // made in an epoch's last steps
  int64_t next_epoch_submitted_ = 0;                      // its batches handed to the decoder
  bool next_epoch_ahead_failed_ = false;                  // a submit ahead failed: no more this epoch
  // Last: destroyed first, abandoning what it holds before the loaders and pools it reads from go.
  std::unique_ptr<Decoders> decoder_;
  int64_t epoch_ = 0, step_ = 0, submitted_ = 0;  // submitted_: this epoch's batches handed to the decoder so far
  double wait_s_ = 0;
};

}  // namespace

std::unique_ptr<InputSource> make_gpu_decode_source(const InputOptions& options, const InputContext& context) {
  return std::make_unique<GpuDecodeSource>(options, context);
}

}  // namespace rn50::input
