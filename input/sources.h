// input/sources.h: the three input sources behind create_input_source (input/create_source.cpp).
#pragma once

#include <memory>

#include "input/source.h"

namespace rn50::input {

// decode: cpu: libjpeg-turbo on the loader's threads, uint8 batches copied to the device and normalised there.
std::unique_ptr<InputSource> make_cpu_decode_source(const InputOptions& options, const InputContext& context);
// decode: gpu: the loader's threads read files; nvJPEG and one crop kernel make the batch on the device.
std::unique_ptr<InputSource> make_gpu_decode_source(const InputOptions& options, const InputContext& context);
// data: synthetic: a few random batches made once on the device and cycled (the step's speed alone).
std::unique_ptr<InputSource> make_synthetic_source(const InputOptions& options, const InputContext& context);

}  // namespace rn50::input
