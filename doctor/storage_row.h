// doctor/storage_row.h: the doctor's storage row: a dataset folder read once uncached and once cached, and whether
// that first read keeps up with the CPU's decoding (torch-free).
#pragma once

#include <cstdint>
#include <string>

#include "doctor/rows.h"

namespace rn50::doctor {

// Below this many bytes a read is over before the disk's rate shows (open() and the first request dominate).
constexpr int64_t kStorageBytesToJudge = int64_t{16} << 20;

struct StorageRead {
  int64_t files = 0;  // regular files read, in directory order, until limit_bytes
  int64_t bytes = 0;
  double first_mb_per_s = 0;   // page cache dropped for each file first (posix_fadvise)
  double cached_mb_per_s = 0;  // the same files again
};

// Reads the regular files under `root` (subfolders too, unreadable ones skipped) until limit_bytes.
StorageRead read_storage(const std::string& root, int64_t limit_bytes);

// The row for `read` of `root`, judged against decoding `decode_images_per_s` images of `mean_kib` KiB each.
ReportRow storage_row(const StorageRead& read, const std::string& root, double decode_images_per_s, double mean_kib);

}  // namespace rn50::doctor
