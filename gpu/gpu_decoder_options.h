// gpu/gpu_decoder_options.h: GpuDecoderOptions, how decode: gpu's decoder uses nvJPEG. No LibTorch, no CUDA.
#pragma once

namespace rn50::gpu {

struct GpuDecoderOptions {
  // NVJPEG_FLAGS_HW_DECODE_NO_PIPELINE for the hardware decoder (nvJPEG otherwise buffers images across batched
  // calls; for `bench-decode` experiments).
  bool hardware_no_pipeline = false;
  // The hardware decoder hands out the planes a JPEG stores (NVJPEG_OUTPUT_YUV) and the crop kernel converts only
  // the pixels it samples, in libjpeg's arithmetic; otherwise nvJPEG converts each whole image to interleaved RGB,
  // with a kernel of its own per image (config key decode_yuv).
  bool planar = false;
  // Each batch is cropped on the decode stream as soon as it is decoded, into a buffer of its own in the format of
  // the step's input that finish_into last wrote; finish_into then only copies it (and its labels) into the step's
  // input, so the compute stream runs a copy between steps instead of the kernel. The first batch, and one after the
  // input's dtype or layout changes, are cropped on the compute stream as without it. Costs a batch of input memory
  // per slot (config key decode_crop_ahead).
  bool crop_at_submit = false;
};

}  // namespace rn50::gpu
