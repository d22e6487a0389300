// bench/decode/gpu_decode_bench_none.cpp: the GPU decode benchmark in builds without nvJPEG: the decoder's
// constructor refuses, naming why.
#include "bench/decode/gpu_decode_bench.h"
#include "input/gpu_decode/gpu_decoder.h"

namespace rn50::bench {

GpuDecodeBenchResult run_gpu_decode_bench(const std::vector<std::vector<uint8_t>>&, int out_size, int batch_size,
                                          double, int device, double, const input::GpuDecoderOptions& decoder, int,
                                          const QueueStep&) {
  input::GpuJpegDecoder refuses(device, batch_size, out_size, decoder);  // throws ConfigError
  return {};
}

}  // namespace rn50::bench
