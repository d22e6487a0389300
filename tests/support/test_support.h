// tests/support/test_support.h: helpers shared by the data tests: a self-deleting temporary folder, synthetic
// images and image comparisons.
#pragma once

#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <system_error>
#include <vector>

#include "tests/support/files.h"

namespace rn50::test {

// A fresh folder under the system temp folder, removed with everything in it when the object dies.
class TempDir {
 public:
  TempDir() {
    std::random_device entropy;  // two 32-bit draws and the pid make clashes between parallel tests unlikely
    const std::string name = "rn50_data_test_" + std::to_string(::getpid()) + "_" + std::to_string(entropy()) + "_" +
                             std::to_string(entropy());
    path_ = std::filesystem::temp_directory_path() / name;
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::permissions(path_, std::filesystem::perms::owner_all, std::filesystem::perm_options::add, ec);
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }
  std::string str() const { return path_.string(); }

 private:
  std::filesystem::path path_;
};

inline void write_bytes(const std::filesystem::path& path, const std::vector<uint8_t>& bytes) {
  rn50::testing::write_file(path.string(), bytes);
}

inline std::vector<uint8_t> read_bytes(const std::filesystem::path& path) {
  return rn50::testing::read_file(path.string());
}

// A smooth RGB image (HWC): low-frequency waves, so that JPEG and resampling errors stay small.
inline std::vector<uint8_t> smooth_image(int width, int height, double phase = 0.0) {
  std::vector<uint8_t> pixels(static_cast<size_t>(width) * height * 3);
  for (int y = 0; y < height; ++y) {
    for (int x = 0; x < width; ++x) {
      uint8_t* p = &pixels[(static_cast<size_t>(y) * width + x) * 3];
      const double u = static_cast<double>(x) / width, v = static_cast<double>(y) / height;
      p[0] = static_cast<uint8_t>(std::lround(127.5 + 100 * std::sin(6.0 * u + phase)));
      p[1] = static_cast<uint8_t>(std::lround(127.5 + 100 * std::cos(5.0 * v + 2 * phase)));
      p[2] = static_cast<uint8_t>(std::lround(127.5 + 90 * std::sin(3.0 * (u + v) + 3 * phase)));
    }
  }
  return pixels;
}

inline double mean_abs_diff(const uint8_t* a, const uint8_t* b, size_t n) {
  double total = 0;
  for (size_t i = 0; i < n; ++i) total += std::abs(static_cast<int>(a[i]) - static_cast<int>(b[i]));
  return total / static_cast<double>(n);
}

inline double psnr(const uint8_t* a, const uint8_t* b, size_t n) {
  double squared = 0;
  for (size_t i = 0; i < n; ++i) {
    const double d = static_cast<double>(a[i]) - b[i];
    squared += d * d;
  }
  const double mse = squared / static_cast<double>(n);
  return mse == 0 ? 99.0 : 10.0 * std::log10(255.0 * 255.0 / mse);
}

}  // namespace rn50::test
