// bench/decode/cpu_decode_bench.cpp: the decode benchmark: rn50's region/DCT-scaled decode against a full decode.
#include "bench/decode/cpu_decode_bench.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <opencv2/core.hpp>
#include <opencv2/imgproc.hpp>
#include <random>
#include <stdexcept>
#include <system_error>
#include <thread>

#include "codecs/jpeg_codec.h"
#include "core/affinity.h"
#include "core/clock.h"
#include "core/errors.h"
#include "core/image_limits.h"
#include "core/log.h"
#include "data/dataset.h"
#include "data/random_draws.h"
#include "data/transforms.h"

namespace rn50::bench {
namespace {

// Runs `work(i)` for i = 0, 1, ... until `seconds` have passed; returns calls per second.
template <typename Work>
double rate(double seconds, Work&& work) {
  const auto start = Clock::now();
  int64_t done = 0;
  double elapsed = 0;
  do {
    for (int k = 0; k < 16; ++k) work(done++);
    elapsed = seconds_since(start);
  } while (elapsed < seconds);
  return static_cast<double>(done) / elapsed;
}

struct TrainDecoder {
  const std::vector<std::vector<uint8_t>>& files;
  const std::vector<codecs::JpegInfo>& infos;
  int size;
  codecs::DecodeScratch scratch;
  std::vector<uint8_t> out = std::vector<uint8_t>(static_cast<size_t>(size) * size * 3);
  void operator()(int64_t i) {
    const size_t f = static_cast<size_t>(i) % files.size();
    std::mt19937_64 rng = data::sample_rng(1, 0, static_cast<uint64_t>(i));
    const codecs::CropRect rect =
        data::random_resized_crop(infos[f].width, infos[f].height, data::RandomResizedCropSpec{}, rng);
    codecs::decode_crop_resize(files[f].data(), files[f].size(), rect, size, size, (i & 1) != 0, out.data(), scratch);
  }
};

}  // namespace

std::vector<std::vector<uint8_t>> make_benchmark_jpegs(int count, int width, int height, uint64_t seed) {
  std::vector<std::vector<uint8_t>> files;
  std::mt19937_64 rng(data::detail::mix_seed({seed, 0x6a70656775ULL}));
  cv::Mat image(height, width, CV_8UC3);
  for (int n = 0; n < count; ++n) {
    // A smooth gradient background, a few filled shapes, then fine noise: photo-like entropy.
    const double a = data::detail::uniform_real(rng, 0, 6.28), b = data::detail::uniform_real(rng, 0, 6.28);
    for (int y = 0; y < height; ++y) {
      auto* row = image.ptr<uint8_t>(y);
      for (int x = 0; x < width; ++x) {
        row[3 * x + 0] = static_cast<uint8_t>(127 + 100 * std::sin(a + x * 0.013));
        row[3 * x + 1] = static_cast<uint8_t>(127 + 100 * std::cos(b + y * 0.017));
        row[3 * x + 2] = static_cast<uint8_t>(127 + 80 * std::sin(a + b + (x + y) * 0.009));
      }
    }
    for (int s = 0; s < 6; ++s) {
      const cv::Point centre(static_cast<int>(data::detail::uniform_int(rng, 0, width - 1)),
                             static_cast<int>(data::detail::uniform_int(rng, 0, height - 1)));
      const cv::Scalar colour(data::detail::uniform_int(rng, 0, 255), data::detail::uniform_int(rng, 0, 255),
                              data::detail::uniform_int(rng, 0, 255));
      cv::circle(image, centre, static_cast<int>(data::detail::uniform_int(rng, 10, height / 3)), colour, cv::FILLED);
    }
    for (int y = 0; y < height; ++y) {
      auto* row = image.ptr<uint8_t>(y);
      for (int x = 0; x < 3 * width; ++x) {
        row[x] =
            static_cast<uint8_t>(std::clamp<int>(row[x] + static_cast<int>(data::detail::normal(rng) * 20), 0, 255));
      }
    }
    files.push_back(codecs::encode_jpeg(image.data, width, height, 3, 90));
  }
  return files;
}

std::vector<std::vector<uint8_t>> read_jpegs(const std::string& folder, int limit) {
  std::vector<std::vector<uint8_t>> files;
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::recursive_directory_iterator it(folder, ec);
  if (ec) throw DataError("cannot read " + folder + ": " + ec.message());
  // Within training's bounds: a link to nowhere, a special file, a file over its byte limit or a header that does
  // not parse or claims more pixels than its limit is skipped, never read whole or decoded.
  int skipped = 0;
  for (; it != fs::recursive_directory_iterator() && static_cast<int>(files.size()) < limit; it.increment(ec)) {
    if (ec) throw DataError("cannot read " + folder + ": " + ec.message());
    std::string ext = it->path().extension().string();
    std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return std::tolower(c); });
    if (ext != ".jpg" && ext != ".jpeg") continue;
    std::vector<uint8_t> bytes;
    try {
      data::read_file(it->path().string(), bytes, kDefaultMaxImageBytes);
      data::check_pixels(codecs::read_jpeg_header(bytes.data(), bytes.size()), kDefaultMaxImagePixels);
    } catch (const std::exception&) {
      ++skipped;
      continue;
    }
    files.push_back(std::move(bytes));
  }
  if (skipped > 0)
    log_warn(strprintf("%d JPEG files in %s skipped: unreadable, too large, or not a JPEG", skipped, folder.c_str()));
  return files;
}

double mean_kib(const std::vector<std::vector<uint8_t>>& files) {
  double kib = 0;
  for (const auto& f : files) kib += static_cast<double>(f.size()) / 1024.0;
  return files.empty() ? 0.0 : kib / static_cast<double>(files.size());
}

DecodeBenchResult run_decode_bench(const std::vector<std::vector<uint8_t>>& files, int output_size, int threads,
                                   double seconds, bool also_pinned) {
  DecodeBenchResult result;
  result.files = static_cast<int>(files.size());
  result.output_size = output_size;
  result.threads = threads;
  std::vector<codecs::JpegInfo> infos;
  for (const auto& f : files) {
    infos.push_back(codecs::read_jpeg_header(f.data(), f.size()));
    result.mean_width += infos.back().width;
    result.mean_height += infos.back().height;
  }
  if (files.empty()) return result;
  result.mean_width /= files.size();
  result.mean_height /= files.size();
  result.mean_kib = mean_kib(files);

  TrainDecoder train{files, infos, output_size, {}};
  result.train_per_core = rate(seconds, train);

  codecs::DecodeScratch scratch;
  std::vector<uint8_t> out(static_cast<size_t>(output_size) * output_size * 3);
  result.val_per_core = rate(seconds, [&](int64_t i) {
    const size_t f = static_cast<size_t>(i) % files.size();
    const codecs::CropRect rect =
        data::center_crop_after_resize(infos[f].width, infos[f].height, output_size * 8 / 7, output_size);
    codecs::decode_crop_resize(files[f].data(), files[f].size(), rect, output_size, output_size, false, out.data(),
                               scratch);
  });

  // The usual loader: decode the whole image at full size, then crop and resize.
  std::vector<uint8_t> full;
  result.full_decode_per_core = rate(seconds, [&](int64_t i) {
    const size_t f = static_cast<size_t>(i) % files.size();
    const codecs::JpegInfo& info = infos[f];
    full.resize(static_cast<size_t>(info.width) * info.height * 3);
    codecs::decode_crop_resize(files[f].data(), files[f].size(), {0, 0, info.width, info.height}, info.width,
                               info.height, false, full.data(), scratch);
    std::mt19937_64 rng = data::sample_rng(1, 0, static_cast<uint64_t>(i));
    const codecs::CropRect r = data::random_resized_crop(info.width, info.height, data::RandomResizedCropSpec{}, rng);
    const cv::Mat whole(info.height, info.width, CV_8UC3, full.data());
    cv::Mat dst(output_size, output_size, CV_8UC3, out.data());
    cv::resize(whole(cv::Rect(r.x, r.y, r.width, r.height)), dst, dst.size(), 0, 0, cv::INTER_LINEAR);
  });

  const std::vector<int> cpus = usable_cpus();
  std::atomic<int> pin_failures{0};
  auto all_threads = [&](bool pinned) {
    std::atomic<int64_t> total{0};
    std::vector<std::thread> pool;
    const auto start = Clock::now();
    try {
      for (int t = 0; t < threads; ++t) {
        pool.emplace_back([&, t] {
          if (pinned && !pin_this_thread(cpu_in_turn(cpus, t))) ++pin_failures;
          TrainDecoder decoder{files, infos, output_size, {}};
          int64_t i = t * 1000003LL, n = 0;
          while (seconds_since(start) < seconds) {
            for (int k = 0; k < 8; ++k, ++n) decoder(i++);
          }
          total += n;
        });
      }
    } catch (const std::system_error& e) {  // a thread limit: the started ones finish before the error goes up
      for (auto& th : pool) th.join();
      throw std::runtime_error(
          strprintf("cannot start %d decode threads (%zu started): %s", threads, pool.size(), e.what()));
    }
    for (auto& th : pool) th.join();
    return static_cast<double>(total.load()) / seconds_since(start);
  };
  result.train_all_threads = all_threads(false);
  if (also_pinned) {
    const double pinned = all_threads(true);
    result.pinned_failures = pin_failures.load();
    result.train_all_threads_pinned = result.pinned_failures == 0 ? pinned : 0.0;
  }
  return result;
}

CpuDecodeLoad::CpuDecodeLoad(const std::vector<std::vector<uint8_t>>& files, int output_size, int threads)
    : files_(files), output_size_(output_size) {
  if (files.empty() || threads < 1 || output_size < 1) throw std::invalid_argument("CpuDecodeLoad: nothing to decode");
  for (const auto& f : files) infos_.push_back(codecs::read_jpeg_header(f.data(), f.size()));
  started_ = Clock::now();
  for (int t = 0; t < threads; ++t) threads_.emplace_back([this, t, threads] { run(t, threads); });
}

CpuDecodeLoad::~CpuDecodeLoad() {
  try {
    stop();
  } catch (...) {  // a thread's error is stop()'s to report; a destructor does not throw
  }
}

void CpuDecodeLoad::run(int thread, int threads) {
  TrainDecoder decode{files_, infos_, output_size_, {}};
  try {
    for (int64_t i = thread; !stopping_.load(std::memory_order_relaxed); i += threads) {
      decode(i);
      decoded_.fetch_add(1, std::memory_order_relaxed);
    }
  } catch (...) {
    std::lock_guard<std::mutex> lock(error_mutex_);
    if (!error_) error_ = std::current_exception();
  }
}

double CpuDecodeLoad::stop() {
  if (rate_ < 0) {
    stopping_ = true;
    for (std::thread& t : threads_) t.join();
    rate_ = static_cast<double>(decoded_.load()) / seconds_since(started_);
  }
  if (error_) std::rethrow_exception(error_);
  return rate_;
}

}  // namespace rn50::bench
