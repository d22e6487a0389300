// bench/decode/cpu_decode_bench.h: how many images per second this CPU decodes and augments, per core and on all cores.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

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

}  // namespace rn50::bench
