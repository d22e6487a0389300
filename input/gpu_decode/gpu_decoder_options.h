// input/gpu_decode/gpu_decoder_options.h: GpuDecoderOptions, how decode: gpu's decoder uses nvJPEG. No LibTorch, no
// CUDA.
#pragma once

namespace rn50::input {

struct GpuDecoderOptions {
  // NVJPEG_FLAGS_HW_DECODE_NO_PIPELINE for the hardware decoder (nvJPEG otherwise buffers images across batched
  // calls; for `bench-decode` experiments).
  bool hardware_no_pipeline = false;
  // The hardware decoder hands out the planes a JPEG stores (NVJPEG_OUTPUT_YUV) and the crop kernel converts only
  // the pixels it samples, in libjpeg's arithmetic; otherwise nvJPEG converts each whole image to interleaved RGB,
  // with a kernel of its own per image (config key decode_yuv).
  bool planar = false;
  // Batches training keeps submitted ahead (config key decode_ahead_batches): batch k+N after queuing step k, so
  // that while a slow nvJPEG call for batch k+N waits for the device to run the steps queued before it, batches
  // k+1 .. k+N-1 are decoded already. The decoder has N+1 slots: the most batches submitted and not yet finished.
  int submit_ahead = 3;  // training's default (Config::decode_ahead_batches; a test checks they agree)
};

}  // namespace rn50::input
