// tests/support/temp_dir.h: a temporary folder (mkdtemp) removed with its contents at scope exit.
#pragma once

// POSIX calls rather than std::filesystem: tests linked with pip's LibTorch crashed (SIGSEGV) in the
// std::filesystem calls of this folder handling on the GPU machine, while the same code in binaries
// without LibTorch ran; the cause was not established.

#include <ftw.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstdio>
#include <stdexcept>
#include <string>

namespace rn50::testing {

class TempDir {
 public:
  TempDir() {
    const char* base = std::getenv("TMPDIR");
    std::string pattern = std::string(base && *base ? base : "/tmp") + "/rn50_test_XXXXXX";
    // Without a folder the tests would write below "/": stop instead.
    if (mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("TempDir: mkdtemp failed for " + pattern);
    path_ = pattern;
  }
  ~TempDir() {
    if (!path_.empty()) {
      nftw(
          path_.c_str(), [](const char* p, const struct stat*, int, struct FTW*) { return std::remove(p); }, 16,
          FTW_DEPTH | FTW_PHYS);
    }
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

inline bool file_exists(const std::string& path) { return access(path.c_str(), F_OK) == 0; }

}  // namespace rn50::testing
