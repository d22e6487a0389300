// input/folder_data.h: FolderData, the ImageNet folder as both decoding sources read it: the train and val datasets,
// this rank's loader for each epoch, the host memory of their pools and the bad-sample report.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "core/host_memory.h"
#include "data/dataset.h"
#include "data/loader.h"
#include "input/source.h"

namespace rn50::input {

class FolderData {
 public:
  // Scans data_root/train (and data_root/val when validating); throws DataError when the folders do not make a
  // dataset for this run (val's classes differ, fewer images than one batch per rank).
  FolderData(const InputOptions& options, const InputContext& context);

  DatasetInfo info() const;
  const data::JpegFolderDataset& train() const { return *train_; }
  const data::JpegFolderDataset& val() const { return *val_; }
  // Pinned (page-locked) host memory where the run copies to a GPU with pin_memory, pageable otherwise.
  bool pinned() const { return pinned_; }
  std::shared_ptr<HostAllocator> host_allocator() const;
  // The start-up table's row of the decode budget.
  std::pair<std::string, std::string> describe_decode_budget() const;

  // This rank's share of epoch `epoch`'s shuffled order from step `first_step` on, batched into `pool`.
  std::unique_ptr<data::BatchLoader> train_loader(int64_t epoch, data::BatchPool& pool, int64_t first_step = 0);
  // This rank's share of the validation split (every world-th image), in order, batched into `pool`.
  std::unique_ptr<data::BatchLoader> val_loader(data::BatchPool& pool) const;

  // Logs a skipped sample (the loader counts it).
  static void report_bad_sample(const std::string& what, const std::string& reason);

 private:
  data::LoaderOptions loader_options(bool train) const;

  const InputOptions options_;
  InputContext context_;
  bool pinned_ = false;
  std::unique_ptr<data::JpegFolderDataset> train_, val_;  // val_: null without validation
  std::shared_ptr<data::DecodeBudget> decode_budget_;     // every loader's
  bool unpinned_workers_logged_ = false;
};

}  // namespace rn50::input
