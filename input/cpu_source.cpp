// input/cpu_source.cpp: decode: cpu: the loader's threads decode and augment into host pools; each batch crosses to
// the device as uint8 (asynchronously from pinned memory, or with a blocking copy) and is normalised there.
#include "input/sources.h"

#include <ATen/ATen.h>

#include <chrono>
#include <optional>

#include "core/clock.h"
#include "input/async_upload.h"
#include "input/folder_data.h"
#include "input/upload.h"

namespace rn50::input {
namespace {

class CpuDecodeSource final : public InputSource {
 public:
  CpuDecodeSource(const InputOptions& options, const InputContext& context)
      : options_(options), context_(context), data_(options, context), uploader_(context.device) {
    info_ = data_.info();
    const std::shared_ptr<HostAllocator> host = data_.host_allocator();
    // The loader fills `prefetch` batches ahead; the uploader holds up to kCopySlots more while they copy.
    const int slots = options.prefetch + (data_.pinned() ? kCopySlots : 1);
    train_pool_ = std::make_unique<data::BatchPool>(slots, options.batch_size, options.image_size, host);
    if (info_.val_images > 0) {
      val_pool_ = std::make_unique<data::BatchPool>(slots, options.batch_size, options.image_size, host);
    }
    if (data_.pinned()) {
      async_upload_ =
          std::make_unique<AsyncUploader>(context.device.index(), options.batch_size, options.image_size, kCopySlots);
    }
  }

  std::vector<std::pair<std::string, std::string>> describe() const override {
    return {{"(input copy)", async_upload_ ? "pinned, asynchronous on a copy stream" : "blocking copy"},
            data_.describe_decode_budget(),
            {"(train images)", std::to_string(info_.train_images)}};
  }

  void begin_epoch(int64_t epoch, int64_t first_step) override {
    loader_ = data_.train_loader(epoch, *train_pool_, first_step);
    wait_s_ = 0;
    if (async_upload_) async_upload_->take_copy_seconds();
  }

  void fill(at::Tensor& images, at::Tensor& labels) override {
    const auto wait_start = Clock::now();
    const std::optional<data::HostBatch> batch = loader_->next();
    wait_s_ += seconds_since(wait_start);
    load(*batch, *loader_, images, labels);
  }

  InputCounts end_epoch() override {
    if (async_upload_) async_upload_->drain();
    InputCounts counts;
    counts.wait_s = wait_s_;
    counts.bad_samples = loader_->bad_samples();
    counts.extra.emplace_back("h2d_copy_s",
                              async_upload_ ? std::optional<double>(async_upload_->take_copy_seconds()) : std::nullopt);
    loader_.reset();
    return counts;
  }

  InputCounts validate(const EvalBatch& eval) override {
    const std::unique_ptr<data::BatchLoader> loader = data_.val_loader(*val_pool_);
    while (const std::optional<data::HostBatch> batch = loader->next()) {
      at::Tensor x = at::empty({batch->size, context_.image_channels, options_.image_size, options_.image_size},
                               at::TensorOptions(context_.device).dtype(context_.image_dtype),
                               context_.channels_last ? at::MemoryFormat::ChannelsLast : at::MemoryFormat::Contiguous);
      at::Tensor y = at::empty({batch->size}, at::TensorOptions(context_.device).dtype(at::kLong));
      load(*batch, *loader, x, y);
      eval(x, y);
    }
    if (async_upload_) async_upload_->drain();
    InputCounts counts;
    counts.bad_samples = loader->bad_samples();
    return counts;
  }

 private:
  static constexpr int kCopySlots = 2;

  // Host batch -> normalised device images and labels in `images` / `labels` (which may be the step's static
  // inputs). The host buffer goes back to the loader once its copy is complete.
  void load(const data::HostBatch& batch, data::BatchLoader& loader, at::Tensor& images, at::Tensor& labels) {
    if (async_upload_) {
      const auto [u8, y] = async_upload_->upload(batch, [&loader](const data::HostBatch& b) { loader.release(b); });
      uploader_.normalize_into(u8, images);
      labels.copy_(y);
      return;
    }
    const auto [u8, y] = uploader_.upload(batch, options_.image_size);
    loader.release(batch);
    uploader_.normalize_into(u8, images);
    labels.copy_(y);
  }

  const InputOptions options_;
  InputContext context_;
  FolderData data_;
  InputUploader uploader_;
  std::unique_ptr<data::BatchPool> train_pool_, val_pool_;
  std::unique_ptr<AsyncUploader> async_upload_;
  std::unique_ptr<data::BatchLoader> loader_;  // this epoch's; after the pools and the uploader it hands batches to
  double wait_s_ = 0;
};

}  // namespace

std::unique_ptr<InputSource> make_cpu_decode_source(const InputOptions& options, const InputContext& context) {
  return std::make_unique<CpuDecodeSource>(options, context);
}

}  // namespace rn50::input
