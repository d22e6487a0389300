// input/folder_data.cpp: opening the ImageNet folder, this rank's loaders, and the pools' host memory.
#include "input/folder_data.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "core/errors.h"
#include "core/log.h"
#include "core/utf8.h"
#include "cuda/cuda_support.h"
#include "data/image_folder.h"

namespace rn50::input {

FolderData::FolderData(const InputOptions& options, const InputContext& context)
    : options_(options),
      context_(context),
      pinned_(options.pin_memory && context.device.is_cuda()),
      decode_budget_(std::make_shared<data::DecodeBudget>(options.decode_budget_bytes)) {
  data::SampleTransform train_tf;
  train_tf.train = true;
  train_tf.image_size = options.image_size;
  train_tf.seed = static_cast<uint64_t>(options.seed);
  data::SampleTransform val_tf = train_tf;
  val_tf.train = false;
  val_tf.resize_size = options.val_resize;
  const data::SampleLimits& limits = options.limits;
  train_ =
      std::make_unique<data::JpegFolderDataset>(data::scan_image_folder(options.data_root + "/train"), train_tf, limits);
  if (options.validate) {
    val_ =
        std::make_unique<data::JpegFolderDataset>(data::scan_image_folder(options.data_root + "/val"), val_tf, limits);
    if (val_->classes() != train_->classes()) {
      throw DataError("the class folders of " + options.data_root + "/val differ from those of train: " +
                      data::class_difference(train_->classes(), val_->classes(), "train", "val"));
    }
  }
  if (static_cast<int64_t>(train_->size()) < static_cast<int64_t>(options.batch_size) * context.world) {
    throw DataError(strprintf("%s/train has %zu images, fewer than one batch per process (batch_size %d, %d processes)",
                              options.data_root.c_str(), train_->size(), options.batch_size, context.world));
  }
}

DatasetInfo FolderData::info() const {
  DatasetInfo info;
  info.classes = train_->classes();
  info.train_images = static_cast<int64_t>(train_->size());
  info.val_images = val_ ? static_cast<int64_t>(val_->size()) : 0;
  // Each rank takes 1/world of the epoch's permutation.
  info.steps_per_epoch = info.train_images / context_.world / options_.batch_size;
  if (options_.max_steps > 0) info.steps_per_epoch = std::min(info.steps_per_epoch, options_.max_steps);
  return info;
}

std::shared_ptr<HostAllocator> FolderData::host_allocator() const {
  return pinned_ ? cuda::make_pinned_allocator() : std::shared_ptr<HostAllocator>(make_pageable_allocator());
}

std::pair<std::string, std::string> FolderData::describe_decode_budget() const {
  return {"(decode budget)", strprintf("%.0f MiB of images being decoded at once (%s)",
                                       static_cast<double>(options_.decode_budget_bytes) / (1 << 20),
                                       options_.decode_budget_origin.c_str())};
}

data::LoaderOptions FolderData::loader_options(bool train) const {
  data::LoaderOptions options;
  options.batch_size = options_.batch_size;
  options.workers = options_.workers;
  // Ranks on one host take consecutive blocks of CPUs (each rank's workers are its share of the cores).
  options.pin_first_cpu = options_.pin_workers ? std::max(0, context_.local_rank * options_.workers) : -1;
  options.drop_last = train;
  options.replace_bad = train;  // validation skips a bad image: its figures cover the images that decode
  options.strict = options_.strict_data;
  options.decode_budget = decode_budget_;
  options.cpu_share = options_.decode_cpu_share;
  return options;
}

void FolderData::report_bad_sample(const std::string& what, const std::string& reason) {
  // The dataset's reasons already begin with the file's path; the device decoders' do not.
  const bool named = reason.compare(0, what.size(), what) == 0;
  // Escaped: a file name holding a newline once split the warning and could forge the log's next line.
  log_warn("bad sample skipped: " + utf8::printable(named ? reason : what + ": " + reason));
}

std::unique_ptr<data::BatchLoader> FolderData::train_loader(int64_t epoch, data::BatchPool& pool, int64_t first_step) {
  std::vector<size_t> order =
      data::epoch_order(train_->size(), options_.seed, epoch, /*shuffle=*/true, context_.rank, context_.world);
  // Each sample's crop and flip follow (seed, epoch, index), so the batches from first_step on are the whole epoch's.
  const auto skip = static_cast<size_t>(std::max<int64_t>(0, first_step) * options_.batch_size);
  order.erase(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(std::min(skip, order.size())));
  auto loader = std::make_unique<data::BatchLoader>(*train_, std::move(order), epoch, loader_options(true), pool,
                                                    report_bad_sample);
  if (options_.pin_workers && loader->pinned_workers() < loader->worker_threads() && !unpinned_workers_logged_) {
    unpinned_workers_logged_ = true;
    log_warn(strprintf("pin_workers: %d of %d decode threads could not be pinned; they run unpinned",
                       loader->worker_threads() - loader->pinned_workers(), loader->worker_threads()));
  }
  return loader;
}

std::unique_ptr<data::BatchLoader> FolderData::val_loader(data::BatchPool& pool) const {
  std::vector<size_t> order;
  for (size_t i = static_cast<size_t>(context_.rank); i < val_->size(); i += static_cast<size_t>(context_.world))
    order.push_back(i);
  return std::make_unique<data::BatchLoader>(*val_, std::move(order), 0, loader_options(false), pool,
                                             report_bad_sample);
}

}  // namespace rn50::input
