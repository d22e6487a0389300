// tests/support/special_jpegs.h: JPEGs that rn50's encoder does not write, for the tests of both decode paths (a CMYK
// one and an RGB-coded one, written with libjpeg directly, and one whose header reads fine but whose data no
// decoder can use), and the libjpeg encode and decode helpers they and the tests use.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>  // jpeglib.h uses FILE without including stdio.h
#include <cstdlib>
#include <vector>

#include <jpeglib.h>

namespace rn50::test {

// libjpeg's encoding of `pixels` (`components` bytes a pixel, in `color_space`); `configure` runs on the compressor
// after jpeg_set_defaults (quality, colour space, sampling factors). Errors end the test program (libjpeg's default).
template <class Configure>
std::vector<uint8_t> libjpeg_encode(const uint8_t* pixels, int width, int height, int components,
                                    J_COLOR_SPACE color_space, Configure&& configure) {
  jpeg_compress_struct cinfo{};
  jpeg_error_mgr err{};
  cinfo.err = jpeg_std_error(&err);
  jpeg_create_compress(&cinfo);
  unsigned char* buffer = nullptr;
  unsigned long size = 0;
  jpeg_mem_dest(&cinfo, &buffer, &size);
  cinfo.image_width = static_cast<JDIMENSION>(width);
  cinfo.image_height = static_cast<JDIMENSION>(height);
  cinfo.input_components = components;
  cinfo.in_color_space = color_space;
  jpeg_set_defaults(&cinfo);
  configure(cinfo);
  jpeg_start_compress(&cinfo, TRUE);
  while (cinfo.next_scanline < cinfo.image_height) {
    JSAMPROW row = const_cast<JSAMPROW>(pixels + static_cast<size_t>(cinfo.next_scanline) * width * components);
    jpeg_write_scanlines(&cinfo, &row, 1);
  }
  jpeg_finish_compress(&cinfo);
  jpeg_destroy_compress(&cinfo);
  std::vector<uint8_t> jpeg(buffer, buffer + size);
  std::free(buffer);
  return jpeg;
}

// Runs `read` on a libjpeg decompressor that has read `jpeg`'s header, and returns what it returns.
template <class Read>
auto libjpeg_decode(const std::vector<uint8_t>& jpeg, Read&& read) {
  jpeg_decompress_struct cinfo{};
  jpeg_error_mgr err{};
  cinfo.err = jpeg_std_error(&err);
  jpeg_create_decompress(&cinfo);
  jpeg_mem_src(&cinfo, jpeg.data(), static_cast<unsigned long>(jpeg.size()));
  jpeg_read_header(&cinfo, TRUE);
  auto result = read(cinfo);
  jpeg_destroy_decompress(&cinfo);
  return result;
}

// A CMYK JPEG as Photoshop writes it: Adobe marker, inverted values (255 = no ink). Left half red ink
// (M + Y), right half blue ink (C + M).
inline std::vector<uint8_t> adobe_cmyk_jpeg(int width, int height) {
  std::vector<uint8_t> cmyk(static_cast<size_t>(width) * height * 4);
  for (int y = 0; y < height; ++y) {
    for (int x = 0; x < width; ++x) {
      uint8_t* p = &cmyk[(static_cast<size_t>(y) * width + x) * 4];
      const bool left = x < width / 2;
      const uint8_t ink[4] = {static_cast<uint8_t>(left ? 0 : 255), 255, static_cast<uint8_t>(left ? 255 : 0), 0};
      for (int c = 0; c < 4; ++c) p[c] = static_cast<uint8_t>(255 - ink[c]);
    }
  }
  // jpeg_set_defaults stores CMYK as YCCK with an Adobe marker, like Photoshop.
  return libjpeg_encode(cmyk.data(), width, height, 4, JCS_CMYK,
                        [](jpeg_compress_struct& cinfo) { jpeg_set_quality(&cinfo, 95, TRUE); });
}

// A 3-component JPEG stored as R, G, B instead of YCbCr (libjpeg's jpeg_set_colorspace JCS_RGB): no JFIF marker,
// an Adobe marker with transform 0, component ids 'R', 'G', 'B'.
inline std::vector<uint8_t> rgb_coded_jpeg(int width, int height) {
  std::vector<uint8_t> rgb(static_cast<size_t>(width) * height * 3);
  for (size_t i = 0; i < rgb.size(); ++i) rgb[i] = static_cast<uint8_t>(i * 7 % 256);
  return libjpeg_encode(rgb.data(), width, height, 3, JCS_RGB,
                        [](jpeg_compress_struct& cinfo) { jpeg_set_colorspace(&cinfo, JCS_RGB); });
}

// A sequential (baseline) JPEG whose three components come in three scans of their own, not interleaved in one: libjpeg
// holds the whole image's coefficients while it decodes one, as for a progressive file.
inline std::vector<uint8_t> non_interleaved_jpeg(int width, int height) {
  std::vector<uint8_t> rgb(static_cast<size_t>(width) * height * 3);
  for (size_t i = 0; i < rgb.size(); ++i) rgb[i] = static_cast<uint8_t>(i * 5 % 256);
  return libjpeg_encode(rgb.data(), width, height, 3, JCS_RGB, [](jpeg_compress_struct& cinfo) {
    static const jpeg_scan_info scans[3] = {{1, {0}, 0, 63, 0, 0}, {1, {1}, 0, 63, 0, 0}, {1, {2}, 0, 63, 0, 0}};
    cinfo.scan_info = scans;
    cinfo.num_scans = 3;
  });
}

// Byte offset of the first segment with `marker` (its 0xFF), found by the segment lengths.
inline size_t segment_offset(const std::vector<uint8_t>& jpeg, uint8_t marker) {
  size_t pos = 2;
  while (pos + 4 <= jpeg.size() && jpeg[pos + 1] != marker) pos += 2 + ((jpeg[pos + 2] << 8) | jpeg[pos + 3]);
  return pos;
}

// A valid JPEG whose frame header sends every component to quantisation table 3, which the file never defines:
// the header parses, decoding fails ("Quantization table 0x03 was not defined").
inline std::vector<uint8_t> undefined_table_jpeg(std::vector<uint8_t> jpeg) {
  const size_t pos = segment_offset(jpeg, 0xC0);
  const int components = jpeg[pos + 9];
  for (int c = 0; c < components; ++c) jpeg[pos + 10 + 3 * c + 2] = 3;  // each component: id, sampling, table
  return jpeg;
}

}  // namespace rn50::test
