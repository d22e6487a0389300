// tests/input/gpu_decode/gpu_decode_fixtures.h: what the GPU decoder's tests share: the GPU and generated-JPEG
// fixtures, pixel comparisons and batches rotated through the decoder (GPU machine, nvJPEG builds only).
#pragma once

#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/CUDAEvent.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "codecs/jpeg_codec.h"
#include "core/errors.h"
#include "cuda/device_ops.h"
#include "data/dataset.h"
#include "data/image_folder.h"
#include "data/loader.h"
#include "bench/decode/cpu_decode_bench.h"
#include "input/gpu_decode/crop_resample.h"
#include "input/gpu_decode/crop_resize_kernel.h"
#include "input/gpu_decode/gpu_decoder.h"
#include "tests/support/files.h"
#include "tests/support/special_jpegs.h"
#include "tests/support/temp_dir.h"
#include "tests/support/test_support.h"

namespace rn50::gpu_decode_test {

// No std::filesystem here: see tests/support/temp_dir.h.
using rn50::testing::file_name;
using rn50::testing::file_stem;
using rn50::testing::read_file;
using rn50::testing::TempDir;
using rn50::testing::write_file;

class GpuDecode : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!at::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
    cuda::use_side_stream(0);
  }
};

inline std::vector<uint8_t> noise(size_t n, uint32_t seed) {
  std::vector<uint8_t> v(n);
  uint32_t x = seed * 2654435761u + 1;
  for (uint8_t& b : v) {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    b = static_cast<uint8_t>(x >> 24);
  }
  return v;
}

// Normalised planes back to levels: (v + shift) / scale.
inline std::vector<float> levels_of(const at::Tensor& chw_float) {
  const input::Normalization norm = input::imagenet_normalization();
  const at::Tensor t = chw_float.to(at::kCPU, at::kFloat).contiguous();
  const int64_t plane = t.size(1) * t.size(2);
  std::vector<float> out(static_cast<size_t>(plane) * 3);
  const float* p = t.data_ptr<float>();
  for (int c = 0; c < 3; ++c)
    for (int64_t i = 0; i < plane; ++i)
      out[static_cast<size_t>(i) * 3 + c] = (p[c * plane + i] + norm.shift[c]) / norm.scale[c];
  return out;
}

struct Difference {
  double mean = 0, p99 = 0, max = 0;
};

inline Difference difference(const std::vector<float>& gpu_levels, const std::vector<uint8_t>& cpu) {
  std::vector<double> d(cpu.size());
  double total = 0;
  for (size_t i = 0; i < cpu.size(); ++i) {
    d[i] = std::abs(gpu_levels[i] - cpu[i]);
    total += d[i];
  }
  std::sort(d.begin(), d.end());
  return {total / static_cast<double>(d.size()), d[d.size() * 99 / 100], d.back()};
}

// The GPU path's pixels against the CPU path's: mean difference below 2 levels and 99th percentile at most 10,
// except on the noise-textured b_photo_like (6 and 40), where the two IDCTs' rounding shows most.
inline void expect_close_to_cpu(const Difference& d, const std::string& name, const std::string& where) {
  const bool noisy = name == "b_photo_like";
  EXPECT_LT(d.mean, noisy ? 6.0 : 2.0) << name << where;
  EXPECT_LE(d.p99, noisy ? 40.0 : 10.0) << name << where;
}

// A one-class ImageFolder of every kind of JPEG the GPU path routes differently.
class GeneratedJpegs : public GpuDecode {
 protected:
  void SetUp() override {
    GpuDecode::SetUp();
    if (IsSkipped()) return;
    const std::string cls = tmp_.path() + "/train/c0";
    auto smooth = [](int w, int h, double phase, bool progressive) {
      const std::vector<uint8_t> pixels = test::smooth_image(w, h, phase);
      return codecs::encode_jpeg(pixels.data(), w, h, 3, 90, progressive);
    };
    auto gray = [](int w, int h, bool progressive) {
      std::vector<uint8_t> g(static_cast<size_t>(w) * h);
      for (int y = 0; y < h; ++y)
        for (int x = 0; x < w; ++x)
          g[static_cast<size_t>(y) * w + x] = static_cast<uint8_t>(128 + 100 * std::sin(x * 0.03 + y * 0.02));
      return codecs::encode_jpeg(g.data(), w, h, 1, 90, progressive);
    };
    kinds_ = {
        {"a_baseline_rgb", smooth(500, 375, 0.1, false)},
        {"b_photo_like", bench::make_benchmark_jpegs(1, 500, 375, 5)[0]},
        {"c_grey", gray(320, 240, false)},
        {"d_progressive_rgb", smooth(400, 300, 0.7, true)},
        {"e_progressive_grey", gray(300, 200, true)},
        {"f_cmyk", test::adobe_cmyk_jpeg(200, 120)},
        {"g_large", smooth(1280, 960, 1.3, false)},
        {"h_small", smooth(64, 48, 2.1, false)},
    };
    for (const auto& [name, bytes] : kinds_) write_file(cls + "/" + name + ".JPEG", bytes);
  }

  data::JpegFolderDataset dataset(bool train, int size) const {
    data::SampleTransform t;
    t.train = train;
    t.image_size = size;
    t.resize_size = size * 8 / 7;
    t.seed = 9;
    return data::JpegFolderDataset(data::scan_image_folder(tmp_.path() + "/train"), t);
  }

  TempDir tmp_;
  std::vector<std::pair<std::string, std::vector<uint8_t>>> kinds_;
};

// Host batches of the generated files as the decoder tests feed them: batch b holds file (i + b) % n at position
// i, so that a slot read or overwritten at the wrong time shows other pixels, and label 10 b + i.
class RotatedBatches {
 public:
  RotatedBatches(const data::JpegFolderDataset& set, int count)
      : set_(set),
        n_(static_cast<int64_t>(set.size())),
        samples_(count, std::vector<data::EncodedSample>(static_cast<size_t>(n_))),
        labels_(count, std::vector<int64_t>(static_cast<size_t>(n_))) {}

  int64_t size() const { return n_; }

  data::HostBatch batch(int b) {
    for (int64_t i = 0; i < n_; ++i) {
      set_.load_encoded(file(b, i), static_cast<uint64_t>(b), samples_[b][i]);
      labels_[b][i] = 10 * b + i;
    }
    data::HostBatch batch;
    batch.labels = labels_[b].data();
    batch.size = n_;
    batch.index = b;
    batch.encoded = samples_[b].data();
    return batch;
  }

  // Batch b's images against the CPU path (expect_close_to_cpu).
  void expect_matches_cpu(int b, const at::Tensor& images, int size) const {
    for (int64_t i = 0; i < n_; ++i) {
      std::vector<uint8_t> cpu(static_cast<size_t>(size) * size * 3);
      data::WorkerScratch scratch;
      set_.load(file(b, i), static_cast<uint64_t>(b), cpu.data(), scratch);
      expect_close_to_cpu(difference(levels_of(images[i]), cpu), file_stem(set_.describe(file(b, i))),
                          " in batch " + std::to_string(b));
    }
  }

 private:
  size_t file(int b, int64_t i) const { return static_cast<size_t>((i + b) % n_); }
  const data::JpegFolderDataset& set_;
  int64_t n_;
  std::vector<std::vector<data::EncodedSample>> samples_;
  std::vector<std::vector<int64_t>> labels_;
};

}  // namespace rn50::gpu_decode_test
