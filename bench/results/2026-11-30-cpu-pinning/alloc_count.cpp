// alloc_count.cpp: decodes N train crops with one DecodeScratch, for valgrind's heap summary (allocations per image).
// Built from the repository root against a build folder's libraries:
//   g++ -O2 -std=c++17 -I. -I/usr/include/opencv4 bench/results/2026-11-30-cpu-pinning/alloc_count.cpp build/data/librn50_data.a build/core/librn50_core.a \
//     -lopencv_imgproc -lopencv_core -ljpeg -lspdlog -lfmt -lpthread -o count
//   valgrind ./count 100; valgrind ./count 300; valgrind --xtree-memory=full ./count 200
#include <cstdlib>
#include <random>
#include <vector>
#include "data/decode_bench.h"
#include "data/jpeg_codec.h"
int main(int argc, char** argv) {
  if (argc != 2) return 2;  // usage: count N
  const int n = std::atoi(argv[1]);
  auto files = rn50::data::make_benchmark_jpegs(8, 500, 375, 7);
  rn50::data::DecodeScratch scratch;
  std::vector<uint8_t> out(224 * 224 * 3);
  for (int i = 0; i < n; ++i) {
    const auto& f = files[i % files.size()];
    rn50::data::CropRect rect{37 + i % 50, 20 + i % 40, 300 - i % 60, 250 - i % 50};
    rn50::data::decode_crop_resize(f.data(), f.size(), rect, 224, 224, i % 2, out.data(), scratch);
  }
}
