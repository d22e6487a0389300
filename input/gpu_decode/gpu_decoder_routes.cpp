// input/gpu_decode/gpu_decoder_routes.cpp: the GPU decoder's routes: which decoder takes each image (nvJPEG parses its
// header), the batched hardware call, nvJPEG's default backend one image at a time, and libjpeg for what nvJPEG
// refuses (CMYK, streams it cannot parse).
#include <algorithm>
#include <exception>
#include <stdexcept>
#include <string>

#include "core/log.h"
#include "cuda/cuda_check.h"
#include "input/gpu_decode/gpu_decoder_impl.h"
#include "input/gpu_decode/nvjpeg_check.h"

namespace rn50::input {

// nvJPEG's header parse walks the whole file for its markers: given only the headers up to the first scan's,
// ended by an end-of-image marker, routing is an order of magnitude faster (docs/gpu-decoding.md). The whole
// file only if that fails; the entropy-coded data it skips is for the decoders to check.
bool GpuJpegDecoder::Impl::parse_header(nvjpegHandle_t handle, const data::EncodedSample& s, nvjpegJpegStream_t parse) {
  const size_t header = s.info.header_bytes;
  if (header > 0 && header < s.bytes.size()) {
    header_copy.assign(s.bytes.data(), s.bytes.data() + header);
    header_copy.push_back(0xFF);
    header_copy.push_back(0xD9);
    if (nvjpegJpegStreamParseHeader(handle, header_copy.data(), header_copy.size(), parse) == NVJPEG_STATUS_SUCCESS)
      return true;
  }
  return nvjpegJpegStreamParseHeader(handle, s.bytes.data(), s.bytes.size(), parse) == NVJPEG_STATUS_SUCCESS;
}

// Which decoder takes sample `s`, parsing its header with nvJPEG; with `planar`, `layout` gets the planes of a
// sample for the hardware decoder.
Route GpuJpegDecoder::Impl::route_of(const data::EncodedSample& s, ChromaLayout& layout) {
  if (s.info.components == 4) return Route::kCpu;  // CMYK/YCCK: libjpeg applies the Adobe inversion the CPU path does
  // nvJPEG has no arithmetic decoding: libjpeg, on a file whose scans the loader checked (check_arithmetic_scans).
  if (s.info.arithmetic) return Route::kCpu;
  nvjpegHandle_t handle = hardware ? hardware.get() : hybrid.get();
  nvjpegJpegStream_t parse = hardware ? hardware_parse.get() : hybrid_parse.get();
  if (!parse_header(handle, s, parse)) return Route::kCpu;
  unsigned width = 0, height = 0;
  if (nvjpegJpegStreamGetFrameDimensions(parse, &width, &height) != NVJPEG_STATUS_SUCCESS ||
      static_cast<int>(width) != s.info.width || static_cast<int>(height) != s.info.height)
    return Route::kCpu;  // the crop was drawn for the header's size; libjpeg will check that size again
  if (!hardware) return Route::kHybrid;
  int unsupported = -1;  // nvJPEG's convention: 0 means supported
  if (nvjpegDecodeBatchedSupported(hardware.get(), parse, &unsupported) != NVJPEG_STATUS_SUCCESS) return Route::kHybrid;
  if (unsupported != 0) return Route::kHybrid;
  // Planes the crop kernel does not convert (4:1:1, say) go to the default backend, which hands out RGB.
  if (planar && (s.info.rgb_coded || !chroma_layout(parse, s.info.width, s.info.height, layout))) return Route::kHybrid;
  return Route::kHardware;
}

// The chroma planes of a parsed 1- or 3-component stream whose Y plane is the whole frame, when each chroma
// sample covers 1 or 2 pixels a side and the planes are more than 2 samples a side (below that libjpeg repeats
// samples instead of interpolating, and a 1-sample side would not tell 4:2:0 from 4:4:0).
bool GpuJpegDecoder::Impl::chroma_layout(nvjpegJpegStream_t parse, int width, int height, ChromaLayout& layout) {
  layout = ChromaLayout{};
  unsigned components = 0, luma_width = 0, luma_height = 0;
  if (nvjpegJpegStreamGetComponentsNum(parse, &components) != NVJPEG_STATUS_SUCCESS ||
      nvjpegJpegStreamGetComponentDimensions(parse, 0, &luma_width, &luma_height) != NVJPEG_STATUS_SUCCESS ||
      static_cast<int>(luma_width) != width || static_cast<int>(luma_height) != height)
    return false;
  if (components == 1) return true;  // grey
  if (components != 3) return false;
  unsigned cb_width = 0, cb_height = 0, cr_width = 0, cr_height = 0;
  if (nvjpegJpegStreamGetComponentDimensions(parse, 1, &cb_width, &cb_height) != NVJPEG_STATUS_SUCCESS ||
      nvjpegJpegStreamGetComponentDimensions(parse, 2, &cr_width, &cr_height) != NVJPEG_STATUS_SUCCESS ||
      cb_width != cr_width || cb_height != cr_height || cb_width <= 2 || cb_height <= 2)
    return false;
  const int w = static_cast<int>(cb_width), h = static_cast<int>(cb_height);
  const int step_x = (width + w - 1) / w, step_y = (height + h - 1) / h;
  if (step_x < 1 || step_x > 2 || step_y < 1 || step_y > 2 || (width + step_x - 1) / step_x != w ||
      (height + step_y - 1) / step_y != h)
    return false;
  layout = ChromaLayout{step_x, step_y, w, h};
  return true;
}

// Where the hardware decoder writes image i: interleaved RGB, or with `planar` the Y plane and then the Cb and
// Cr planes (input::use_packed_planes' layout; a grey image's chroma pointers lead to unused full-size room: its
// whole-image allocation holds three planes).
nvjpegImage_t GpuJpegDecoder::Impl::hardware_destination(uint8_t* pixels, int i, int width, int height) const {
  if (!planar) return rgb_destination(pixels, width);
  const ChromaLayout& c = scratch.layouts[i];
  const bool grey = c.step_x == 0;
  const size_t chroma_width = static_cast<size_t>(grey ? width : c.width);
  const size_t luma = static_cast<size_t>(width) * static_cast<size_t>(height);
  nvjpegImage_t image{};
  image.channel[0] = pixels;
  image.pitch[0] = static_cast<size_t>(width);
  image.channel[1] = pixels + luma;
  image.channel[2] = pixels + luma + chroma_width * static_cast<size_t>(grey ? height : c.height);
  image.pitch[1] = image.pitch[2] = chroma_width;
  return image;
}

nvjpegImage_t GpuJpegDecoder::Impl::rgb_destination(uint8_t* pixels, int width) {
  nvjpegImage_t image{};
  image.channel[0] = pixels;
  image.pitch[0] = static_cast<size_t>(width) * 3;
  return image;
}

void GpuJpegDecoder::Impl::decode_hardware(const data::HostBatch& batch, Slot& slot, uint8_t* base) {
  scratch.hardware_positions.clear();
  scratch.hardware_data.clear();
  scratch.hardware_lengths.clear();
  for (int i = 0; i < static_cast<int>(batch.size); ++i) {
    if (scratch.routes[i] != Route::kHardware) continue;
    const data::EncodedSample& s = batch.encoded[i];
    scratch.hardware_positions.push_back(i);
    scratch.hardware_data.push_back(s.bytes.data());
    scratch.hardware_lengths.push_back(s.bytes.size());
  }
  if (scratch.hardware_positions.empty()) return;
  nvjpegStatus_t status = decode_hardware_batch(batch, slot, base);
  if (status == NVJPEG_STATUS_SUCCESS) {
    for (int i : scratch.hardware_positions) {
      scratch.decoded[i] = true;
      if (planar) {  // hardware_destination's layout
        const ChromaLayout& c = scratch.layouts[i];
        input::use_packed_planes(scratch.plans[i], c.step_x, c.step_y, c.width, c.height);
      }
    }
    job_counts.hardware += static_cast<int64_t>(scratch.hardware_positions.size());
    return;
  }
  // The batched call does not say which image failed: the default backend retries each one.
  slot.hardware_batch = 0;
  if (!hardware_failure_logged) {
    log_warn("nvJPEG's hardware decoder failed a batch (" + nvjpeg_status_name(status) +
             "); its images go through the default backend (logged once)");
    hardware_failure_logged = true;
  }
  for (int i : scratch.hardware_positions) scratch.routes[i] = Route::kHybrid;
}

// One batched hardware call for the images at hardware_positions. When a planar batch fails and the same batch
// then decodes as RGB, nvJPEG does not take planar output here: decode_yuv is turned off for good (logged).
nvjpegStatus_t GpuJpegDecoder::Impl::decode_hardware_batch(const data::HostBatch& batch, Slot& slot, uint8_t* base) {
  const nvjpegStatus_t status = hardware_call(batch, slot, base);
  if (status == NVJPEG_STATUS_SUCCESS || !planar) return status;
  planar = false;
  for (Slot& other : slots) other.hardware_batch = 0;  // initialised for the other output format
  const nvjpegStatus_t as_rgb = hardware_call(batch, slot, base);
  if (as_rgb == NVJPEG_STATUS_SUCCESS) {
    log_warn("nvJPEG's hardware decoder failed a batch with planar output (" + nvjpeg_status_name(status) +
             ") and decoded it as RGB: decode_yuv is off from here on");
    return as_rgb;
  }
  planar = true;  // the batch itself is bad: planar output stays
  for (Slot& other : slots) other.hardware_batch = 0;
  return status;
}

nvjpegStatus_t GpuJpegDecoder::Impl::hardware_call(const data::HostBatch& batch, Slot& slot, uint8_t* base) {
  const int count = static_cast<int>(scratch.hardware_positions.size());
  scratch.hardware_images.clear();
  for (int i : scratch.hardware_positions) {
    const data::EncodedSample& s = batch.encoded[i];
    scratch.hardware_images.push_back(hardware_destination(base + scratch.offsets[i], i, s.info.width, s.info.height));
  }
  nvjpegStatus_t status = NVJPEG_STATUS_SUCCESS;
  double call_s = 0;
  timed(call_s, [&] {
    // Initialised again only when the count changes or a batch failed: initialising resizes nvJPEG's buffers.
    if (slot.hardware_batch != count) {
      status = nvjpegDecodeBatchedInitialize(hardware.get(), slot.hardware_state.get(), count, 1,
                                             planar ? NVJPEG_OUTPUT_YUV : NVJPEG_OUTPUT_RGBI);
      slot.hardware_batch = status == NVJPEG_STATUS_SUCCESS ? count : 0;
    }
    if (status == NVJPEG_STATUS_SUCCESS)
      status =
          nvjpegDecodeBatched(hardware.get(), slot.hardware_state.get(), scratch.hardware_data.data(),
                              scratch.hardware_lengths.data(), scratch.hardware_images.data(), decode_stream.stream());
  });
  job_counts.hardware_call_s += call_s;
  job_counts.slowest_hardware_call_s = std::max(job_counts.slowest_hardware_call_s, call_s);
  return status;
}

void GpuJpegDecoder::Impl::decode_hybrid(const data::HostBatch& batch, uint8_t* base) {
  for (int i = 0; i < static_cast<int>(batch.size); ++i) {
    if (scratch.routes[i] != Route::kHybrid || scratch.decoded[i]) continue;
    const data::EncodedSample& s = batch.encoded[i];
    nvjpegImage_t image = rgb_destination(base + scratch.offsets[i], s.info.width);
    const nvjpegStatus_t status = nvjpegDecode(hybrid.get(), hybrid_state.get(), s.bytes.data(), s.bytes.size(),
                                               NVJPEG_OUTPUT_RGBI, &image, hybrid_stream.stream());
    // The state stages each image in one pinned buffer that the next nvjpegDecode overwrites while this one's
    // copy to the device may still be queued: on the H200 the first of a batch's two progressive images came
    // out wrong (mean 35 levels off) in every batch after the first. So each decode finishes first. On GPUs
    // with hardware engines this route takes only what they refuse; on others it takes every image, one round
    // trip each (nvJPEG's decoupled API with alternating pinned buffers would lift that).
    // Finished here, so decode_done (recorded on decode_stream later) needs no event from hybrid_stream.
    waited([&] { RN50_CUDA_CHECK(cudaStreamSynchronize(hybrid_stream.stream())); });
    if (status == NVJPEG_STATUS_SUCCESS) {
      scratch.decoded[i] = true;
      ++job_counts.hybrid;
    } else {
      scratch.routes[i] = Route::kCpu;
      scratch.reasons[i] = "nvJPEG: " + nvjpeg_status_name(status);
    }
  }
}

void GpuJpegDecoder::Impl::upload_predecoded(const data::HostBatch& batch, uint8_t* base) {
  const size_t image_bytes = static_cast<size_t>(out_size) * out_size * 3;
  const int n = static_cast<int>(batch.size);
  for (int i = 0; i < n;) {
    if (scratch.routes[i] != Route::kPredecoded) {
      ++i;
      continue;
    }
    if (batch.images == nullptr)
      throw std::invalid_argument("GpuJpegDecoder: a predecoded sample in a batch without pixel room");
    int end = i + 1;
    while (end < n && scratch.routes[end] == Route::kPredecoded &&
           scratch.offsets[end] == scratch.offsets[end - 1] + image_bytes)
      ++end;
    const size_t count = static_cast<size_t>(end - i);
    // The host batch stays unchanged until retire() hands it back, after the device has read it.
    RN50_CUDA_CHECK(cudaMemcpyAsync(base + scratch.offsets[i], batch.images + image_bytes * static_cast<size_t>(i),
                                    image_bytes * count, cudaMemcpyHostToDevice, decode_stream.stream()));
    for (int k = i; k < end; ++k) scratch.decoded[k] = true;
    job_counts.loader_cpu += static_cast<int64_t>(count);
    i = end;
  }
}

// libjpeg makes the finished out_size image (the CPU path's own crop, resize and flip); the kernel then only
// normalises it, through the identity plan.
void GpuJpegDecoder::Impl::decode_cpu(const data::HostBatch& batch, Slot& slot, uint8_t* base) {
  const size_t image_bytes = static_cast<size_t>(out_size) * out_size * 3;
  for (int i = 0; i < static_cast<int>(batch.size); ++i) {
    if (scratch.routes[i] != Route::kCpu) continue;
    const data::EncodedSample& s = batch.encoded[i];
    if (!slot.fallback_host) slot.fallback_host = pinned_alloc(image_bytes * static_cast<size_t>(max_batch));
    uint8_t* host = static_cast<uint8_t*>(slot.fallback_host.get()) + image_bytes * static_cast<size_t>(i);
    try {
      codecs::decode_crop_resize(s.bytes.data(), s.bytes.size(), s.geometry.rect, out_size, out_size, s.geometry.flip,
                                 host, cpu_scratch);
    } catch (const std::exception& e) {  // DecodeError, or a crop outside what libjpeg reads (invalid_argument)
      scratch.reasons[i] += (scratch.reasons[i].empty() ? "" : "; ") + std::string("libjpeg: ") + e.what();
      continue;
    }
    RN50_CUDA_CHECK(
        cudaMemcpyAsync(base + scratch.offsets[i], host, image_bytes, cudaMemcpyHostToDevice, decode_stream.stream()));
    scratch.plans[i] = input::plan_identity(out_size);
    scratch.decoded[i] = true;
    ++job_counts.cpu_fallback;
  }
}

}  // namespace rn50::input
