// input/gpu_decode/gpu_decoder_none.cpp: decode: gpu in builds without nvJPEG (CPU-only builds, and CUDA toolkits
// without it): a configuration error before anything starts.
#include "core/errors.h"
#include "cuda/cuda_support.h"
#include "input/gpu_decode/gpu_decoder.h"

namespace rn50::input {
namespace {
[[noreturn]] void no_nvjpeg() {
  throw ConfigError(
      std::string("config key 'decode': gpu needs nvJPEG, and this rn50 was built without it (") +
      (cuda::built_with_cuda() ? "CMake found no nvjpeg.h and libnvjpeg in the CUDA toolkit" : "a CPU-only build") +
      ")");
}
}  // namespace

bool built_with_nvjpeg() { return false; }

struct GpuJpegDecoder::Impl {};
GpuJpegDecoder::GpuJpegDecoder(int, int, int, const GpuDecoderOptions&) { no_nvjpeg(); }
GpuJpegDecoder::~GpuJpegDecoder() = default;
void GpuJpegDecoder::submit(const data::HostBatch&, const BadDecodeHandler&, const ReleaseBatch&) { no_nvjpeg(); }
void GpuJpegDecoder::finish_into(at::Tensor&, at::Tensor&) { no_nvjpeg(); }
void GpuJpegDecoder::decode_into(const data::HostBatch&, at::Tensor&, at::Tensor&, const BadDecodeHandler&,
                                 const ReleaseBatch&) {
  no_nvjpeg();
}
void GpuJpegDecoder::drain() {}
uint64_t GpuJpegDecoder::finished_batches() { return 0; }
void GpuJpegDecoder::abandon() {}
GpuDecodeCounts GpuJpegDecoder::take_counts() { return {}; }
std::string GpuJpegDecoder::describe() const { return "no nvJPEG in this build"; }

}  // namespace rn50::input
