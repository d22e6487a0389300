// input/create_source.cpp: create_input_source, the one place that maps a source kind to an input source.
#include "core/errors.h"
#include "input/gpu_decode/gpu_decoder.h"
#include "input/sources.h"

namespace rn50::input {

void check_input_device(SourceKind kind, const c10::Device& device) {
  if (kind != SourceKind::kGpuDecode) return;
  if (!device.is_cuda()) throw ConfigError("config key 'decode': gpu needs a CUDA device; this run is on the CPU");
  if (!built_with_nvjpeg()) {
    throw ConfigError(
        "config key 'decode': gpu needs nvJPEG, and this rn50 was built without it (see the "
        "\"rn50: nvJPEG\" line of the CMake configure output)");
  }
}

std::unique_ptr<InputSource> create_input_source(const InputOptions& options, const InputContext& context) {
  check_input_device(options.kind, context.device);
  switch (options.kind) {
    case SourceKind::kSynthetic:
      return make_synthetic_source(options, context);
    case SourceKind::kGpuDecode:
      return make_gpu_decode_source(options, context);
    case SourceKind::kCpuDecode:
      break;
  }
  return make_cpu_decode_source(options, context);
}

}  // namespace rn50::input
