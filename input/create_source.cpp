// input/create_source.cpp: create_input_source, the one place that maps data and decode to an input source.
#include "core/config.h"
#include "core/errors.h"
#include "input/gpu_decode/gpu_decoder.h"
#include "input/sources.h"

namespace rn50::input {

void check_input_device(const Config& config, const c10::Device& device) {
  if (config.data != DataSource::kFolder || config.decode != Decode::kGpu) return;
  if (!device.is_cuda()) throw ConfigError("config key 'decode': gpu needs a CUDA device; this run is on the CPU");
  if (!built_with_nvjpeg()) {
    throw ConfigError(
        "config key 'decode': gpu needs nvJPEG, and this rn50 was built without it (see the "
        "\"rn50: nvJPEG\" line of the CMake configure output)");
  }
}

std::unique_ptr<InputSource> create_input_source(const Config& config, const InputContext& context) {
  check_input_device(config, context.device);
  if (config.data == DataSource::kSynthetic) return make_synthetic_source(config, context);
  if (config.decode == Decode::kGpu) return make_gpu_decode_source(config, context);
  return make_cpu_decode_source(config, context);
}

}  // namespace rn50::input
