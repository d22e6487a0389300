// tests/input/gpu_decode/test_planar_resample.cpp: the resample arithmetic on planar YCbCr (what nvJPEG hands out for
// NVJPEG_OUTPUT_YUV) against libjpeg's own RGB decode of the same JPEG: chroma upsampling and colour conversion.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "input/gpu_decode/crop_resample.h"
#include "tests/support/special_jpegs.h"

namespace rn50::input {
namespace {

// A photo-like RGB image: smooth colour gradients with a little noise (noise alone would make chroma subsampling
// the whole story).
std::vector<uint8_t> photo_like(int width, int height) {
  std::mt19937 gen(11);
  std::uniform_int_distribution<int> noise(-6, 6);
  std::vector<uint8_t> pixels(static_cast<size_t>(width) * height * 3);
  for (int y = 0; y < height; ++y) {
    for (int x = 0; x < width; ++x) {
      const double u = static_cast<double>(x) / width, v = static_cast<double>(y) / height;
      const double base[3] = {40 + 180 * u, 200 - 150 * v, 90 + 120 * std::sin(6.0 * u + 3.0 * v)};
      for (int c = 0; c < 3; ++c)
        pixels[(static_cast<size_t>(y) * width + x) * 3 + c] =
            static_cast<uint8_t>(std::clamp(static_cast<int>(base[c]) + noise(gen), 0, 255));
    }
  }
  return pixels;
}

// Encoded with the luma sampling factors h x v (1x1: 4:4:4, 2x1: 4:2:2, 2x2: 4:2:0, 1x2: 4:4:0); 1 channel: grey.
std::vector<uint8_t> encode(const std::vector<uint8_t>& pixels, int width, int height, int channels, int h, int v) {
  return test::libjpeg_encode(pixels.data(), width, height, channels, channels == 1 ? JCS_GRAYSCALE : JCS_RGB,
                              [&](jpeg_compress_struct& cinfo) {
                                jpeg_set_quality(&cinfo, 95, TRUE);
                                if (channels == 3) {
                                  cinfo.comp_info[0].h_samp_factor = h;
                                  cinfo.comp_info[0].v_samp_factor = v;
                                }
                              });
}

// libjpeg's RGB decode (interleaved), with its default ("fancy") chroma upsampling; grey comes out as RGB too.
std::vector<uint8_t> decode_rgb(const std::vector<uint8_t>& jpeg) {
  return test::libjpeg_decode(jpeg, [](jpeg_decompress_struct& cinfo) {
    cinfo.out_color_space = JCS_RGB;
    jpeg_start_decompress(&cinfo);
    std::vector<uint8_t> out(static_cast<size_t>(cinfo.output_width) * cinfo.output_height * 3);
    while (cinfo.output_scanline < cinfo.output_height) {
      JSAMPROW row = out.data() + static_cast<size_t>(cinfo.output_scanline) * cinfo.output_width * 3;
      jpeg_read_scanlines(&cinfo, &row, 1);
    }
    jpeg_finish_decompress(&cinfo);
    return out;
  });
}

struct Planes {
  std::vector<uint8_t> packed;  // Y, then Cb, then Cr, rows unpadded (use_packed_planes' layout)
  int step_x = 0, step_y = 0, chroma_width = 0, chroma_height = 0;
};

// The JPEG's planes as stored (libjpeg's raw data output), packed the way rn50's GPU decoder lays out nvJPEG's
// planar output.
Planes decode_planes(const std::vector<uint8_t>& jpeg) {
  return test::libjpeg_decode(jpeg, [](jpeg_decompress_struct& cinfo) {
    cinfo.raw_data_out = TRUE;
    jpeg_start_decompress(&cinfo);
    const int components = cinfo.num_components;
    const int width = static_cast<int>(cinfo.image_width), height = static_cast<int>(cinfo.image_height);
    std::vector<int> plane_width(components), plane_height(components), padded_width(components), rows(components);
    std::vector<std::vector<uint8_t>> padded(components);
    for (int c = 0; c < components; ++c) {
      const jpeg_component_info& info = cinfo.comp_info[c];
      plane_width[c] = static_cast<int>(info.downsampled_width);
      plane_height[c] = static_cast<int>(info.downsampled_height);
      padded_width[c] = static_cast<int>(info.width_in_blocks) * DCTSIZE;
      rows[c] = info.v_samp_factor * DCTSIZE;
      const size_t padded_rows = (static_cast<size_t>(info.height_in_blocks) + info.v_samp_factor) * DCTSIZE;
      padded[c].assign(static_cast<size_t>(padded_width[c]) * padded_rows, 0);
    }
    // One iMCU row at a time: max_v_samp_factor * 8 image lines, rows[c] rows of component c.
    std::vector<std::vector<JSAMPROW>> row_pointers(components);
    for (int imcu = 0; cinfo.output_scanline < cinfo.output_height; ++imcu) {
      std::vector<JSAMPARRAY> planes(components);
      for (int c = 0; c < components; ++c) {
        row_pointers[c].resize(rows[c]);
        for (int r = 0; r < rows[c]; ++r)
          row_pointers[c][r] = padded[c].data() + static_cast<size_t>(imcu * rows[c] + r) * padded_width[c];
        planes[c] = row_pointers[c].data();
      }
      const auto lines = static_cast<JDIMENSION>(cinfo.max_v_samp_factor * DCTSIZE);
      if (jpeg_read_raw_data(&cinfo, planes.data(), lines) == 0) break;
    }
    jpeg_finish_decompress(&cinfo);
    Planes out;
    for (int c = 0; c < components; ++c) {
      for (int y = 0; y < plane_height[c]; ++y) {
        const auto row = padded[c].begin() + static_cast<ptrdiff_t>(y) * padded_width[c];
        out.packed.insert(out.packed.end(), row, row + plane_width[c]);
      }
    }
    if (components == 3) {  // the sampling factors, read back from the planes' sizes
      out.step_x = (width + plane_width[1] - 1) / plane_width[1];
      out.step_y = (height + plane_height[1] - 1) / plane_height[1];
      out.chroma_width = plane_width[1];
      out.chroma_height = plane_height[1];
    }
    return out;
  });
}

struct Stats {
  double mean = 0;
  int max = 0;
};

Stats compare(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b) {
  Stats s;
  double total = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const int d = std::abs(static_cast<int>(a[i]) - static_cast<int>(b[i]));
    total += d;
    s.max = std::max(s.max, d);
  }
  s.mean = total / static_cast<double>(a.size());
  return s;
}

// Every pixel of the planar source against libjpeg's RGB for 4:4:4, 4:2:2, 4:2:0, 4:4:0 and grey, odd sizes (the last
// chroma column and row cover one pixel), then crops through the resample (box 1 and 2; bilinear and area).
// Exact: the planar source repeats libjpeg's integer upsampling and colour conversion, so it hands out libjpeg's
// RGB, and the resample then sees the same pixels.
TEST(PlanarResample, YCbCrPlanesGiveLibjpegsRgb) {
  const int width = 203, height = 157;
  struct Case {
    const char* name;
    int channels, h, v;
  };
  for (const Case c : {Case{"4:4:4", 3, 1, 1}, Case{"4:2:2", 3, 2, 1}, Case{"4:2:0", 3, 2, 2}, Case{"4:4:0", 3, 1, 2},
                       Case{"grey", 1, 1, 1}}) {
    SCOPED_TRACE(c.name);
    std::vector<uint8_t> pixels = photo_like(width, height);
    if (c.channels == 1) {
      std::vector<uint8_t> grey(static_cast<size_t>(width) * height);
      for (size_t i = 0; i < grey.size(); ++i) grey[i] = pixels[i * 3 + 1];
      pixels = grey;
    }
    const std::vector<uint8_t> jpeg = encode(pixels, width, height, c.channels, c.h, c.v);
    const std::vector<uint8_t> rgb = decode_rgb(jpeg);  // grey too comes out as RGB
    const Planes planes = decode_planes(jpeg);
    ResamplePlan planar;
    planar.width = width;
    planar.height = height;
    use_packed_planes(planar, planes.step_x, planes.step_y, planes.chroma_width, planes.chroma_height);
    if (c.channels == 3) {
      EXPECT_EQ(planes.step_x, c.h);
      EXPECT_EQ(planes.step_y, c.v);
    }

    std::vector<uint8_t> converted(rgb.size());
    for (int y = 0; y < height; ++y) {
      for (int x = 0; x < width; ++x) {
        float px[3];
        resample::source_pixel(planes.packed.data(), planar, x, y, px);
        for (int k = 0; k < 3; ++k)
          converted[(static_cast<size_t>(y) * width + x) * 3 + k] = static_cast<uint8_t>(px[k]);
      }
    }
    const Stats pixelwise = compare(converted, rgb);
    std::printf("[ measured ] %-5s every pixel: mean %.3f max %d\n", c.name, pixelwise.mean, pixelwise.max);
    EXPECT_EQ(pixelwise.max, 0);

    struct Crop {
      codecs::CropRect rect;
      int out;
      bool flip;
    };
    int boxes_seen = 0;
    bool area_seen = false;
    for (const Crop& crop : {Crop{{3, 5, 190, 140}, 64, false}, Crop{{40, 20, 150, 120}, 224, true},
                             Crop{{0, 0, 203, 157}, 40, false}, Crop{{101, 77, 102, 80}, 50, true}}) {
      ResamplePlan interleaved = plan_resample(width, height, {crop.rect, crop.flip}, crop.out);
      ResamplePlan from_planes = interleaved;
      use_packed_planes(from_planes, planes.step_x, planes.step_y, planes.chroma_width, planes.chroma_height);
      const size_t out_bytes = static_cast<size_t>(crop.out) * crop.out * 3;
      std::vector<uint8_t> expected(out_bytes), mine(out_bytes);
      resample_reference(rgb.data(), interleaved, crop.out, expected.data());
      resample_reference(planes.packed.data(), from_planes, crop.out, mine.data());
      const Stats s = compare(mine, expected);
      EXPECT_EQ(s.max, 0) << "box " << interleaved.box << " area " << interleaved.area;
      boxes_seen |= 1 << interleaved.box;
      area_seen = area_seen || interleaved.area;
    }
    EXPECT_GT(boxes_seen & ~2, 0) << "no crop used DCT-scale emulation";
    EXPECT_TRUE(area_seen);
  }
}

}  // namespace
}  // namespace rn50::input
