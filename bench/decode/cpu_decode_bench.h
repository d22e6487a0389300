// bench/decode/cpu_decode_bench.h: how many images per second this CPU decodes and augments, per core and on all cores.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <exception>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "codecs/jpeg_codec.h"

namespace rn50::bench {

// ImageNet-like JPEGs: smooth shapes under fine texture and noise, so that they compress to about the
// 100 KB of an average ImageNet photo at 500x375 (quality 90).
std::vector<std::vector<uint8_t>> make_benchmark_jpegs(int count, int width, int height, uint64_t seed);

// Reads up to `limit` JPEG files below a folder (recursively), for benchmarking a user's own data.
std::vector<std::vector<uint8_t>> read_jpegs(const std::string& folder, int limit);

// The files' mean size in KiB (0 for none): decode time follows the compressed size, so each benchmark prints it.
double mean_kib(const std::vector<std::vector<uint8_t>>& files);

struct DecodeBenchResult {
  int files = 0;
  double mean_width = 0, mean_height = 0, mean_kib = 0;
  int output_size = 224;
  // Images per second on one thread:
  double train_per_core = 0;        // rn50's path: RandomResizedCrop region + DCT-scaled decode, one resize, flip
  double val_per_core = 0;          // rn50's path: resize-256 + centre-crop-224 region at reduced scale
  double full_decode_per_core = 0;  // the usual path: full decode at full scale, then crop and resize
  // Images per second with `threads` threads on the train path.
  int threads = 1;
  double train_all_threads = 0;
  // The same with thread k pinned to the k-th CPU of the affinity mask (cycling); 0 when not measured, or when a
  // thread could not be pinned (pinned_failures says how many).
  double train_all_threads_pinned = 0;
  int pinned_failures = 0;
};

// Runs each measurement for about `seconds` over the files, cycling; with `also_pinned`, the all-thread one
// twice, the second time with pinned threads. Throws DecodeError if a file is bad.
DecodeBenchResult run_decode_bench(const std::vector<std::vector<uint8_t>>& files, int output_size, int threads,
                                   double seconds, bool also_pinned = false);

// `threads` threads decoding `files` (cycled) on rn50's train path, as the loader's decode threads do, from
// construction until stop(): a CPU as busy as training keeps it, beside another measurement (bench-decode --decode gpu
// --cpu-load N: is GPU decoding slowed by the CPU's other work?). The files must be JPEGs that decode.
class CpuDecodeLoad {
 public:
  CpuDecodeLoad(const std::vector<std::vector<uint8_t>>& files, int output_size, int threads);
  ~CpuDecodeLoad();
  CpuDecodeLoad(const CpuDecodeLoad&) = delete;
  CpuDecodeLoad& operator=(const CpuDecodeLoad&) = delete;

  // Stops the threads (the first call; later ones return the same) and returns the images/s they decoded together.
  // Throws what a thread threw (a file that did not decode).
  double stop();

 private:
  void run(int thread, int threads);

  const std::vector<std::vector<uint8_t>>& files_;
  const int output_size_;
  std::vector<codecs::JpegInfo> infos_;  // each file's header
  std::atomic<bool> stopping_{false};
  std::atomic<int64_t> decoded_{0};
  std::mutex error_mutex_;
  std::exception_ptr error_;
  std::chrono::steady_clock::time_point started_;
  double rate_ = -1;                  // < 0: not stopped yet
  std::vector<std::thread> threads_;  // last: they start once the rest is made
};

}  // namespace rn50::bench
