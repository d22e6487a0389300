// tests/codecs/test_jpeg_codec.cpp: tests of region decoding (scale, crop, flip, colour spaces, errors) and encoding.
#include "codecs/jpeg_codec.h"

#include <algorithm>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>
#include <opencv2/core.hpp>
#include <opencv2/imgproc.hpp>

#include "codecs/jpeg_header.h"
#include "core/errors.h"
#include "tests/support/error_of.h"
#include "tests/support/special_jpegs.h"
#include "tests/support/test_support.h"

namespace rn50::codecs {
namespace {

using test::adobe_cmyk_jpeg;
using test::mean_abs_diff;
using test::psnr;
using test::smooth_image;

std::vector<uint8_t> decode(const std::vector<uint8_t>& jpeg, const CropRect& rect, int out_width, int out_height,
                            bool flip = false) {
  std::vector<uint8_t> out(static_cast<size_t>(out_width) * out_height * 3);
  DecodeScratch scratch;
  decode_crop_resize(jpeg.data(), jpeg.size(), rect, out_width, out_height, flip, out.data(), scratch);
  return out;
}

CropRect full(int width, int height) { return CropRect{0, 0, width, height}; }

const auto decode_error_of = rn50::testing::error_of<DecodeError>;

TEST(JpegCodec, RoundTripAtFullCropIsClose) {
  const int w = 96, h = 64;
  const std::vector<uint8_t> pixels = smooth_image(w, h);
  const std::vector<uint8_t> jpeg = encode_jpeg(pixels.data(), w, h, 3, 95);
  const JpegInfo info = read_jpeg_header(jpeg.data(), jpeg.size());
  EXPECT_EQ(info.width, w);
  EXPECT_EQ(info.height, h);
  EXPECT_EQ(info.components, 3);
  EXPECT_FALSE(info.progressive);
  const std::vector<uint8_t> out = decode(jpeg, full(w, h), w, h);
  EXPECT_GT(psnr(out.data(), pixels.data(), out.size()), 35.0);
  EXPECT_LT(mean_abs_diff(out.data(), pixels.data(), out.size()), 2.0);
}

TEST(JpegCodec, ProgressiveJpegDecodes) {
  const int w = 80, h = 72;
  const std::vector<uint8_t> pixels = smooth_image(w, h, 0.7);
  const std::vector<uint8_t> jpeg = encode_jpeg(pixels.data(), w, h, 3, 92, /*progressive=*/true);
  EXPECT_TRUE(read_jpeg_header(jpeg.data(), jpeg.size()).progressive);
  EXPECT_GT(psnr(decode(jpeg, full(w, h), w, h).data(), pixels.data(), pixels.size()), 35.0);
  // The region path (row skipping, column cropping, reduced scale) works on progressive data too.
  const std::vector<uint8_t> baseline = encode_jpeg(pixels.data(), w, h, 3, 92, false);
  const CropRect rect{13, 21, 50, 40};
  EXPECT_LT(mean_abs_diff(decode(jpeg, rect, 24, 20).data(), decode(baseline, rect, 24, 20).data(), 24 * 20 * 3), 2.0);
}

TEST(JpegCodec, ChoosesTheSmallestSufficientFastDctScale) {
  // Scales 3/8 and 5/8..7/8 have no SIMD IDCT and are slower than the next of 1/8, 2/8, 4/8, 8/8 up.
  EXPECT_EQ(detail::choose_scale_num(800, 600, 224, 224), 4);  // 3/8 would do (225 >= 224); 4/8 is faster
  EXPECT_EQ(detail::choose_scale_num(448, 448, 224, 224), 4);  // exactly half
  EXPECT_EQ(detail::choose_scale_num(447, 500, 224, 224), 8);  // just under half: full scale
  EXPECT_EQ(detail::choose_scale_num(896, 900, 224, 224), 2);
  EXPECT_EQ(detail::choose_scale_num(1792, 1792, 224, 224), 1);  // 1/8 is the smallest libjpeg offers
  EXPECT_EQ(detail::choose_scale_num(5000, 5000, 224, 224), 1);
  EXPECT_EQ(detail::choose_scale_num(2000, 500, 224, 224), 4);  // the shorter side decides
  EXPECT_EQ(detail::choose_scale_num(224, 224, 224, 224), 8);
  EXPECT_EQ(detail::choose_scale_num(100, 100, 224, 224), 8);  // upscaling: full scale
}

TEST(JpegCodec, ReducedScaleDecodesFewerPixels) {
  // The scratch rows hold exactly what libjpeg decoded: a 1/8-scale region of a 1024x768 image needs
  // about 1/64 of the pixels of a full-scale decode.
  const int w = 1024, h = 768;
  const std::vector<uint8_t> pixels = smooth_image(w, h);
  const std::vector<uint8_t> jpeg = encode_jpeg(pixels.data(), w, h, 3, 90);
  std::vector<uint8_t> out(64 * 64 * 3);
  DecodeScratch small;
  decode_crop_resize(jpeg.data(), jpeg.size(), full(w, h), 64, 64, false, out.data(), small);
  DecodeScratch large;
  std::vector<uint8_t> big(static_cast<size_t>(w) * h * 3);
  decode_crop_resize(jpeg.data(), jpeg.size(), full(w, h), w, h, false, big.data(), large);
  EXPECT_EQ(large.rows.size(), static_cast<size_t>(w) * h * 3);
  EXPECT_EQ(small.rows.size(), static_cast<size_t>(w / 8) * (h / 8) * 3);
  // A crop decodes only its rows (and its columns, widened to an iMCU of at most 16 scaled pixels each side).
  DecodeScratch region;
  decode_crop_resize(jpeg.data(), jpeg.size(), CropRect{400, 300, 200, 100}, 200, 100, false, big.data(), region);
  EXPECT_LE(region.rows.size(), static_cast<size_t>(200 + 32) * 100 * 3);
  EXPECT_GE(region.rows.size(), static_cast<size_t>(200) * 100 * 3);
}

// Decoding a region at reduced scale must match decoding everything, then cropping and resizing with OpenCV.
// Tolerance: mean absolute difference below 2 grey levels (of 255) on a smooth image; reduced-scale IDCT and
// area resampling are both box-like averages, and the rounding of the scaled rectangle shifts it by at most
// half a scaled pixel.
TEST(JpegCodec, CropAtReducedScaleMatchesFullDecodeThenCropAndResize) {
  const int w = 640, h = 480;
  const std::vector<uint8_t> pixels = smooth_image(w, h, 0.3);
  const std::vector<uint8_t> jpeg = encode_jpeg(pixels.data(), w, h, 3, 95);
  std::vector<uint8_t> whole = decode(jpeg, full(w, h), w, h);
  const cv::Mat whole_mat(h, w, CV_8UC3, whole.data());

  struct Case {
    CropRect rect;
    int out_w, out_h;
  };
  const Case cases[] = {
      {{100, 60, 400, 300}, 112, 112},  // scale 4/8, then a linear resize
      {{64, 32, 500, 400}, 100, 90},    // scale 2/8, then a linear resize
      {{0, 100, 600, 150}, 60, 60},     // scale 4/8, then an area resize (the width still shrinks 5x)
      {{37, 51, 301, 205}, 64, 48},     // offsets off the iMCU grid
      {{0, 0, 640, 480}, 80, 60},       // scale 1/8, no resize left
      {{0, 0, 640, 480}, 30, 20},       // scale 1/8, then an area resize
      {{513, 401, 127, 79}, 100, 60},   // bottom-right corner
      {{5, 7, 50, 40}, 100, 80},        // upscaling at full scale
  };
  for (const Case& c : cases) {
    SCOPED_TRACE("rect " + std::to_string(c.rect.x) + "," + std::to_string(c.rect.y) + " " +
                 std::to_string(c.rect.width) + "x" + std::to_string(c.rect.height));
    const std::vector<uint8_t> fast = decode(jpeg, c.rect, c.out_w, c.out_h);
    cv::Mat reference;
    const cv::Mat roi = whole_mat(cv::Rect(c.rect.x, c.rect.y, c.rect.width, c.rect.height));
    const bool area = c.rect.width >= 2 * c.out_w || c.rect.height >= 2 * c.out_h;
    cv::resize(roi, reference, cv::Size(c.out_w, c.out_h), 0, 0, area ? cv::INTER_AREA : cv::INTER_LINEAR);
    EXPECT_LT(mean_abs_diff(fast.data(), reference.data, fast.size()), 2.0);
    // And both stay close to the original pixels.
    cv::Mat original;
    const cv::Mat source(h, w, CV_8UC3, const_cast<uint8_t*>(pixels.data()));
    cv::resize(source(cv::Rect(c.rect.x, c.rect.y, c.rect.width, c.rect.height)), original, cv::Size(c.out_w, c.out_h),
               0, 0, area ? cv::INTER_AREA : cv::INTER_LINEAR);
    EXPECT_LT(mean_abs_diff(fast.data(), original.data, fast.size()), 3.0);
  }
}

TEST(JpegCodec, FlipIsTheMirrorOfNoFlip) {
  const int w = 120, h = 90;
  const std::vector<uint8_t> pixels = smooth_image(w, h, 1.1);
  const std::vector<uint8_t> jpeg = encode_jpeg(pixels.data(), w, h, 3, 90);
  for (int out_w : {31, 32}) {  // odd and even widths: the middle column stays put
    const CropRect rect{10, 5, 90, 70};
    const std::vector<uint8_t> plain = decode(jpeg, rect, out_w, 24, false);
    const std::vector<uint8_t> flipped = decode(jpeg, rect, out_w, 24, true);
    for (int y = 0; y < 24; ++y)
      for (int x = 0; x < out_w; ++x)
        for (int c = 0; c < 3; ++c)
          ASSERT_EQ(flipped[(static_cast<size_t>(y) * out_w + x) * 3 + c],
                    plain[(static_cast<size_t>(y) * out_w + (out_w - 1 - x)) * 3 + c]);
  }
}

TEST(JpegCodec, GrayscaleComesOutAsEqualRgb) {
  const int w = 64, h = 48;
  std::vector<uint8_t> gray(static_cast<size_t>(w) * h);
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x) gray[static_cast<size_t>(y) * w + x] = static_cast<uint8_t>(40 + 2 * x + y);
  const std::vector<uint8_t> jpeg = encode_jpeg(gray.data(), w, h, 1, 95);
  EXPECT_EQ(read_jpeg_header(jpeg.data(), jpeg.size()).components, 1);
  const std::vector<uint8_t> out = decode(jpeg, full(w, h), w, h);
  double error = 0;
  for (size_t i = 0; i < gray.size(); ++i) {
    ASSERT_EQ(out[i * 3], out[i * 3 + 1]);
    ASSERT_EQ(out[i * 3], out[i * 3 + 2]);
    error += std::abs(out[i * 3] - gray[i]);
  }
  EXPECT_LT(error / gray.size(), 2.0);
  // Also through the crop + scale path.
  const std::vector<uint8_t> small = decode(jpeg, CropRect{9, 3, 40, 40}, 16, 16);
  for (size_t i = 0; i < 16 * 16; ++i)
    ASSERT_TRUE(small[i * 3] == small[i * 3 + 1] && small[i * 3] == small[i * 3 + 2]);
}

TEST(JpegCodec, AdobeCmykDecodesToTheInkColours) {
  const int w = 64, h = 32;
  const std::vector<uint8_t> jpeg = adobe_cmyk_jpeg(w, h);
  EXPECT_EQ(read_jpeg_header(jpeg.data(), jpeg.size()).components, 4);
  const std::vector<uint8_t> out = decode(jpeg, full(w, h), w, h);
  auto pixel = [&](const std::vector<uint8_t>& image, int width, int x, int y) {
    return cv::Vec3i(image[(static_cast<size_t>(y) * width + x) * 3],
                     image[(static_cast<size_t>(y) * width + x) * 3 + 1],
                     image[(static_cast<size_t>(y) * width + x) * 3 + 2]);
  };
  const cv::Vec3i red = pixel(out, w, 8, 16), blue = pixel(out, w, 56, 16);
  EXPECT_NEAR(red[0], 255, 8);
  EXPECT_NEAR(red[1], 0, 8);
  EXPECT_NEAR(red[2], 0, 8);
  EXPECT_NEAR(blue[0], 0, 8);
  EXPECT_NEAR(blue[1], 0, 8);
  EXPECT_NEAR(blue[2], 255, 8);
  // A crop of the right half, scaled down, is blue throughout its middle.
  const std::vector<uint8_t> right = decode(jpeg, CropRect{40, 0, 24, 32}, 6, 8);
  const cv::Vec3i middle = pixel(right, 6, 3, 4);
  EXPECT_NEAR(middle[0], 0, 8);
  EXPECT_NEAR(middle[2], 255, 8);
}

TEST(JpegCodec, ScratchIsReusedInTheSteadyState) {
  const int w = 200, h = 150;
  const std::vector<uint8_t> pixels = smooth_image(w, h);
  const std::vector<uint8_t> jpeg = encode_jpeg(pixels.data(), w, h, 3, 90);
  std::vector<uint8_t> out(48 * 48 * 3);
  DecodeScratch scratch;
  decode_crop_resize(jpeg.data(), jpeg.size(), CropRect{20, 10, 150, 120}, 48, 48, false, out.data(), scratch);
  const uint8_t* rows = scratch.rows.data();
  const std::vector<uint8_t> first = out;
  for (int i = 0; i < 3; ++i) {
    decode_crop_resize(jpeg.data(), jpeg.size(), CropRect{20, 10, 150, 120}, 48, 48, false, out.data(), scratch);
    EXPECT_EQ(scratch.rows.data(), rows);
    EXPECT_EQ(out, first);
  }
}

TEST(JpegCodec, BadDataThrowsDecodeErrorWithTheReason) {
  const int w = 64, h = 64;
  const std::vector<uint8_t> pixels = smooth_image(w, h);
  const std::vector<uint8_t> jpeg = encode_jpeg(pixels.data(), w, h, 3, 90);
  std::vector<uint8_t> out(32 * 32 * 3);
  DecodeScratch scratch;
  auto both = [&](const std::vector<uint8_t>& bytes) {
    const std::string header = decode_error_of([&] { read_jpeg_header(bytes.data(), bytes.size()); });
    const std::string body = decode_error_of(
        [&] { decode_crop_resize(bytes.data(), bytes.size(), full(w, h), 32, 32, false, out.data(), scratch); });
    EXPECT_EQ(header, body);
    return body;
  };

  EXPECT_NE(both({}).find("empty file"), std::string::npos);

  const std::vector<uint8_t> half(jpeg.begin(), jpeg.begin() + static_cast<std::ptrdiff_t>(jpeg.size() / 2));
  EXPECT_NE(both(half).find("truncated"), std::string::npos);

  std::mt19937 gen(7);
  std::vector<uint8_t> noise(2000);
  for (uint8_t& b : noise) b = static_cast<uint8_t>(gen());
  noise[0] = 0x12;
  EXPECT_NE(both(noise).find("not a JPEG"), std::string::npos);

  std::vector<uint8_t> png = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n', 0, 0, 0, 13, 'I', 'H', 'D', 'R'};
  png.resize(200, 0);
  EXPECT_NE(both(png).find("PNG"), std::string::npos);

  // Ends with an end-of-image marker but the data stops inside a comment segment: libjpeg's premature end
  // warning must be an error.
  std::vector<uint8_t> short_comment = {0xFF, 0xD8, 0xFF, 0xFE, 0x01, 0x00, 'a', 'b', 0xFF, 0xD9};
  EXPECT_NE(both(short_comment).find("truncated JPEG (Premature end"), std::string::npos);

  // Valid start and end, garbage in between: libjpeg's own error.
  std::vector<uint8_t> garbage(jpeg.begin(), jpeg.begin() + 2);
  garbage.insert(garbage.end(), {0xFF, 0xC4, 0x00, 0x03, 0x55});  // a Huffman table segment that is far too short
  garbage.insert(garbage.end(), 40, 0x00);
  garbage.insert(garbage.end(), {0xFF, 0xD9});
  EXPECT_NE(both(garbage).find("corrupt or unsupported JPEG"), std::string::npos);
}

TEST(JpegCodec, CorruptScanDataNeverCrashes) {
  const int w = 128, h = 96;
  const std::vector<uint8_t> pixels = smooth_image(w, h);
  const std::vector<uint8_t> jpeg = encode_jpeg(pixels.data(), w, h, 3, 90);
  std::mt19937 gen(3);
  std::vector<uint8_t> out(40 * 40 * 3);
  DecodeScratch scratch;
  for (int trial = 0; trial < 50; ++trial) {
    std::vector<uint8_t> bytes = jpeg;
    for (int k = 0; k < 8; ++k) bytes[20 + gen() % (bytes.size() - 40)] = static_cast<uint8_t>(gen());
    try {
      // The header may be hit too, so the rectangle comes from what the header says, as the dataset does it.
      const JpegInfo info = read_jpeg_header(bytes.data(), bytes.size());
      const CropRect rect{info.width / 8, info.height / 8, info.width - info.width / 4, info.height - info.height / 4};
      decode_crop_resize(bytes.data(), bytes.size(), rect, 40, 40, trial % 2 == 1, out.data(), scratch);
    } catch (const DecodeError&) {
      // a clean error is fine; anything else fails the test
    }
  }
}

// `jpeg` cut to its first `keep` bytes and closed with an end-of-image marker.
std::vector<uint8_t> cut_and_closed(const std::vector<uint8_t>& jpeg, size_t keep) {
  std::vector<uint8_t> out(jpeg.begin(), jpeg.begin() + static_cast<std::ptrdiff_t>(keep));
  out.push_back(0xFF);
  out.push_back(0xD9);
  return out;
}

// Where the first scan's entropy-coded data ends: the first marker after its header that is not a restart marker.
size_t first_scan_end(const std::vector<uint8_t>& jpeg) {
  size_t at = parse_jpeg_frame_header(jpeg.data(), jpeg.size()).header_bytes;
  while (at + 1 < jpeg.size() && !(jpeg[at] == 0xFF && jpeg[at + 1] != 0 && (jpeg[at + 1] & 0xF8) != 0xD0)) ++at;
  return at;
}

// libjpeg decodes an arithmetic-coded file cut short and closed again without a word (its decoder reads on from
// zeros after a marker); check_arithmetic_scans refuses one cut in a scan that codes every block (a sequential
// file's, a progressive file's first), and takes whole files.
TEST(JpegCodec, ArithmeticCodedDataThatEndsBeforeItsScanIsRefused) {
  std::mt19937 rng(4);
  for (const auto& [width, height] :
       std::vector<std::pair<int, int>>{{256, 192}, {17, 9}, {8, 8}, {640, 40}, {40, 640}}) {
    std::vector<uint8_t> pixels = smooth_image(width, height, 0.7);
    for (auto& p : pixels)
      p = static_cast<uint8_t>(std::clamp(static_cast<int>(p) + static_cast<int>(rng() % 31) - 15, 0, 255));
    for (const bool progressive : {false, true}) {
      const std::string what =
          std::to_string(width) + "x" + std::to_string(height) + (progressive ? " progressive" : "");
      const std::vector<uint8_t> whole = encode_jpeg(pixels.data(), width, height, 3, 90, progressive, true);
      EXPECT_NO_THROW(check_arithmetic_scans(whole.data(), whole.size())) << what;
      EXPECT_NO_THROW(decode(whole, full(width, height), width, height)) << what;
      if (height < 64) continue;  // two rows of blocks or fewer: nothing to tell
      const size_t header = parse_jpeg_frame_header(whole.data(), whole.size()).header_bytes;
      const size_t keep = progressive ? (header + first_scan_end(whole)) / 2 : whole.size() / 2;
      const std::vector<uint8_t> cut = cut_and_closed(whole, keep);
      EXPECT_NO_THROW(decode(cut, full(width, height), width, height)) << what << ": libjpeg took it";
      const std::string refused = decode_error_of([&] { check_arithmetic_scans(cut.data(), cut.size()); });
      EXPECT_NE(refused.find("truncated JPEG (the arithmetic-coded data ends "), std::string::npos) << what << refused;
      if (!progressive) continue;
      // Cut in its later scans (most of its bytes), a progressive file is a whole picture at a lower quality.
      const std::vector<uint8_t> half = cut_and_closed(whole, whole.size() / 2);
      EXPECT_GT(whole.size() / 2, first_scan_end(whole)) << what;
      EXPECT_NO_THROW(check_arithmetic_scans(half.data(), half.size())) << what;
    }
  }
  // A Huffman-coded file passes unread (its scans have their own checks).
  const std::vector<uint8_t> pixels = smooth_image(64, 64);
  const std::vector<uint8_t> huffman = encode_jpeg(pixels.data(), 64, 64, 3, 90);
  const std::vector<uint8_t> cut = cut_and_closed(huffman, huffman.size() / 2);
  EXPECT_NO_THROW(check_arithmetic_scans(cut.data(), cut.size()));
  // Restart markers inside the data are no end of it.
  const std::vector<uint8_t> restarts =
      test::libjpeg_encode(pixels.data(), 64, 64, 3, JCS_RGB, [](jpeg_compress_struct& c) {
        c.arith_code = TRUE;
        c.restart_in_rows = 1;
      });
  EXPECT_NO_THROW(check_arithmetic_scans(restarts.data(), restarts.size()));
  EXPECT_THROW(check_arithmetic_scans(nullptr, 0), DecodeError);
}

// What the bytes cannot tell apart: an image whose rows below some point the encoder coded in no bytes at all (it
// drops trailing zero bytes, the decoder reads zeros after the marker) looks like a file cut there. Refused too.
TEST(JpegCodec, AnArithmeticCodedImageWhoseLastRowsCodeInNoBytesIsRefusedToo) {
  std::vector<uint8_t> pixels(static_cast<size_t>(512) * 512 * 3, 128);
  const std::vector<uint8_t> flat = encode_jpeg(pixels.data(), 512, 512, 3, 90, false, true);
  EXPECT_LT(flat.size(), 1000u);  // 512x512 pixels in a few hundred bytes
  EXPECT_NE(decode_error_of([&] { check_arithmetic_scans(flat.data(), flat.size()); }).find("truncated JPEG"),
            std::string::npos);
}

TEST(JpegCodec, RejectsBadArguments) {
  const std::vector<uint8_t> pixels = smooth_image(16, 16);
  EXPECT_THROW(encode_jpeg(pixels.data(), 16, 16, 2, 90), std::invalid_argument);
  EXPECT_THROW(encode_jpeg(pixels.data(), 16, 16, 3, 0), std::invalid_argument);
  EXPECT_THROW(encode_jpeg(pixels.data(), 0, 16, 3, 90), std::invalid_argument);
  const std::vector<uint8_t> jpeg = encode_jpeg(pixels.data(), 16, 16, 3, 90);
  std::vector<uint8_t> out(8 * 8 * 3);
  DecodeScratch scratch;
  EXPECT_THROW(decode_crop_resize(jpeg.data(), jpeg.size(), CropRect{8, 8, 9, 8}, 8, 8, false, out.data(), scratch),
               std::invalid_argument);
  EXPECT_THROW(decode_crop_resize(jpeg.data(), jpeg.size(), CropRect{0, 0, 16, 16}, 0, 8, false, out.data(), scratch),
               std::invalid_argument);
}

}  // namespace
}  // namespace rn50::codecs
