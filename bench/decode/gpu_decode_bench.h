// bench/decode/gpu_decode_bench.h: `rn50 bench-decode --decode gpu`: images/s of the GPU decode-and-augment stage
// alone. No LibTorch in this header: the command line includes it.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "input/gpu_decode/gpu_decoder_options.h"

namespace rn50::bench {

struct GpuDecodeBenchResult {
  int batch_size = 0;
  double train_per_s = 0;                              // RandomResizedCrop + flip
  double val_per_s = 0;                                // resize + centre crop
  int64_t hardware = 0, hybrid = 0, cpu_fallback = 0;  // images per route, both measurements together
  double host_us_per_image = 0;   // the decoder's host work per image, mostly its thread's (warm-up batches included)
  double wait_us_per_image = 0;   // ... and its thread's waits for the device
  double route_us_per_image = 0;  // part of host_us_per_image: nvJPEG parsing headers to route them
  double hardware_us_per_image = 0;        // part of host_us_per_image: nvJPEG's batched hardware calls
  double decode_latency_ms_per_batch = 0;  // a batch from submit to ready (GpuDecodeCounts::decode_latency_s)
  double crop_ms_per_batch = 0;            // ... and its crop kernel
  std::string routes;                      // GpuJpegDecoder::describe()
  // With a simulated training step (step_ms > 0): the step's time alone, and each batch's time with the step
  // queued on the same stream right before the batch's decode; and with each batch submitted N batches ahead
  // (after the step N before its use; N: GpuDecoderOptions::submit_ahead), as training does. A decode that
  // overlaps the step adds little; one that runs only after it adds its whole time.
  double step_ms = 0;
  double step_then_decode_ms = 0;
  double decode_ahead_ms = 0;
  int decode_ahead_batches = 0;  // that N
  // nvJPEG's batched hardware calls per image routed during the decode-ahead measurement, as hardware_us_per_image:
  // in training on an H100 they took 4x their time alone, beside the simulated step not (docs/gpu-decoding.md).
  double ahead_hardware_us_per_image = 0;
};

// A training step for the decode to run beside instead of the simulated one: queues one step on the current stream
// (rn50 doctor passes the model's graphed step, so that the measurement includes how the real step and nvJPEG slow
// each other down).
using QueueStep = std::function<void()>;

// Decodes batches of the files (cycled) into half-precision channels-last batches on `device`, as training
// would, for about `seconds` per measurement: host work, nvJPEG and the kernel, until the device is done. With
// step_ms > 0, also measures the train batches with a simulated step of about step_ms (matrix products) in two
// orders (see step_then_decode_ms, decode_ahead_ms); with `step` set, beside that step instead (step_ms then only
// needs to be positive).
// decoder: the decoder's options (input/gpu_decode/gpu_decoder.h); out_channels: the batches' channels (3, or a
// ResNet stem's padded count, models::input_channels, which training writes).
// Throws rn50::ConfigError in builds without nvJPEG, rn50::DecodeError when a file does not decode.
GpuDecodeBenchResult run_gpu_decode_bench(const std::vector<std::vector<uint8_t>>& files, int out_size, int batch_size,
                                          double seconds, int device, double step_ms = 0,
                                          const input::GpuDecoderOptions& decoder = {}, int out_channels = 3,
                                          const QueueStep& step = {});

}  // namespace rn50::bench
