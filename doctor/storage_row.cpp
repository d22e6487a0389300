// doctor/storage_row.cpp: the doctor's storage row: reading a dataset folder uncached and cached, and the verdict.
#include "doctor/storage_row.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <system_error>
#include <vector>

#include "core/log.h"

namespace rn50::doctor {

StorageRead read_storage(const std::string& root, int64_t limit_bytes) {
  namespace fs = std::filesystem;
  StorageRead read;
  std::vector<std::string> files;
  std::error_code ec;
  // An unreadable subfolder is skipped, not an exception that ends the doctor's minute of measurements.
  fs::recursive_directory_iterator it(root, fs::directory_options::skip_permission_denied, ec), end;
  for (; !ec && it != end && read.bytes < limit_bytes; it.increment(ec)) {
    std::error_code file_ec;
    if (!it->is_regular_file(file_ec)) continue;
    const auto size = it->file_size(file_ec);
    if (file_ec) continue;
    files.push_back(it->path().string());
    read.bytes += static_cast<int64_t>(size);
  }
  read.files = static_cast<int64_t>(files.size());
  if (files.empty()) return read;
  std::vector<char> buffer(1 << 20);
  auto mb_per_s = [&](bool drop) {
    const auto start = std::chrono::steady_clock::now();
    for (const auto& f : files) {
      const int fd = ::open(f.c_str(), O_RDONLY);
      if (fd < 0) continue;
      if (drop) ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
      while (::read(fd, buffer.data(), buffer.size()) > 0) {
      }
      ::close(fd);
    }
    const std::chrono::duration<double> s = std::chrono::steady_clock::now() - start;
    return static_cast<double>(read.bytes) / 1e6 / std::max(1e-9, s.count());
  };
  read.first_mb_per_s = mb_per_s(true);
  read.cached_mb_per_s = mb_per_s(false);
  return read;
}

ReportRow storage_row(const StorageRead& read, const std::string& root, double decode_images_per_s, double mean_kib) {
  ReportRow row{"storage", "dataset read, first / cached", "", "", ""};
  if (read.files == 0 || read.bytes == 0) {
    row.value = read.files == 0 ? "no files" : "empty files";
    row.verdict = "bad";
    row.note = "nothing to read under " + root + ": training needs train/<class>/<image> files there";
    return row;
  }
  row.value = strprintf("%.0f / %.0f MB/s", read.first_mb_per_s, read.cached_mb_per_s);
  const double images_per_s = read.first_mb_per_s * 1e6 / (mean_kib * 1024.0);
  row.note = strprintf("%lld files; first read feeds about %.0f img/s of %.0f KiB", static_cast<long long>(read.files),
                       images_per_s, mean_kib);
  if (read.bytes < kStorageBytesToJudge) {
    row.verdict = "info";
    row.note += strprintf("; only %.1f MiB, too little to judge the storage", read.bytes / 1048576.0);
  } else {
    row.verdict = images_per_s < decode_images_per_s ? "warn" : "ok";
  }
  return row;
}

}  // namespace rn50::doctor
