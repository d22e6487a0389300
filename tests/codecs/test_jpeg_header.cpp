// tests/codecs/test_jpeg_header.cpp: tests of the plain-C++ frame header parser against libjpeg's header reader, on
// generated JPEGs of many shapes and kinds, and of the errors it must give for what is not a whole JPEG.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "codecs/jpeg_codec.h"
#include "codecs/jpeg_header.h"
#include "core/errors.h"
#include "tests/support/error_of.h"
#include "tests/support/special_jpegs.h"
#include "tests/support/test_support.h"

namespace rn50::codecs {
namespace {

std::vector<uint8_t> gray_jpeg(int width, int height, bool progressive) {
  std::vector<uint8_t> gray(static_cast<size_t>(width) * height);
  for (size_t p = 0; p < gray.size(); ++p) gray[p] = static_cast<uint8_t>(p * 13 % 251);
  return encode_jpeg(gray.data(), width, height, 1, 90, progressive);
}

std::vector<uint8_t> rgb_jpeg(int width, int height, bool progressive) {
  const std::vector<uint8_t> pixels = test::smooth_image(width, height);
  return encode_jpeg(pixels.data(), width, height, 3, 90, progressive);
}

using test::segment_offset;

std::string error_of(const std::vector<uint8_t>& bytes) {
  return rn50::testing::error_of<DecodeError>([&] { parse_jpeg_frame_header(bytes.data(), bytes.size()); });
}

// The header walk and the first scan's length check, as the dataset runs them.
std::string scan_error_of(const std::vector<uint8_t>& bytes) {
  return rn50::testing::error_of<DecodeError>(
      [&] { check_first_scan_length(parse_jpeg_frame_header(bytes.data(), bytes.size())); });
}

void expect_same_header(const std::vector<uint8_t>& jpeg, const std::string& what) {
  SCOPED_TRACE(what);
  const JpegInfo mine = parse_jpeg_frame_header(jpeg.data(), jpeg.size());
  const JpegInfo libjpeg = read_jpeg_header(jpeg.data(), jpeg.size());
  EXPECT_EQ(mine.width, libjpeg.width);
  EXPECT_EQ(mine.height, libjpeg.height);
  EXPECT_EQ(mine.components, libjpeg.components);
  EXPECT_EQ(mine.progressive, libjpeg.progressive);
  EXPECT_EQ(mine.multi_scan, libjpeg.multi_scan);
}

// Whether libjpeg itself reads the file's three components as R, G, B (its jpeg_color_space after the header).
bool libjpeg_reads_rgb(const std::vector<uint8_t>& jpeg) {
  return test::libjpeg_decode(jpeg, [](jpeg_decompress_struct& cinfo) { return cinfo.jpeg_color_space == JCS_RGB; });
}

// The file without the segment at `offset` (found by segment_offset).
std::vector<uint8_t> without_segment(std::vector<uint8_t> jpeg, size_t offset) {
  const size_t length = 2 + ((static_cast<size_t>(jpeg[offset + 2]) << 8) | jpeg[offset + 3]);
  jpeg.erase(jpeg.begin() + static_cast<ptrdiff_t>(offset), jpeg.begin() + static_cast<ptrdiff_t>(offset + length));
  return jpeg;
}

TEST(JpegHeader, MatchesLibjpegOnGeneratedJpegsOfEveryKind) {
  const int sizes[][2] = {{1, 1}, {17, 9}, {64, 48}, {500, 375}, {375, 500}, {2049, 3}, {3, 1500}, {4000, 16}};
  for (const auto& size : sizes) {
    const std::string shape = std::to_string(size[0]) + "x" + std::to_string(size[1]);
    for (bool progressive : {false, true}) {
      const std::string kind = progressive ? " progressive" : " baseline";
      expect_same_header(rgb_jpeg(size[0], size[1], progressive), shape + kind + " RGB");
      expect_same_header(gray_jpeg(size[0], size[1], progressive), shape + kind + " grey");
    }
  }
  const std::vector<uint8_t> cmyk = test::adobe_cmyk_jpeg(40, 24);
  expect_same_header(cmyk, "Adobe CMYK");
  EXPECT_EQ(parse_jpeg_frame_header(cmyk.data(), cmyk.size()).components, 4);
  const std::vector<uint8_t> progressive = rgb_jpeg(500, 375, true);
  const JpegInfo info = parse_jpeg_frame_header(progressive.data(), progressive.size());
  EXPECT_EQ(info.width, 500);
  EXPECT_EQ(info.height, 375);
  EXPECT_EQ(info.components, 3);
  EXPECT_TRUE(info.progressive);
}

// A sequential file with a scan per component holds the whole image's coefficients in libjpeg as a progressive one does
// (1000x800: 4.8 MB, against 0.1 MB of rows for the same file interleaved): both readers say so, and its decoded size
// for the decode budget counts them.
TEST(JpegHeader, TellsMultiScanFilesAsLibjpegDoes) {
  const std::vector<uint8_t> separate = test::non_interleaved_jpeg(1000, 800);
  const std::vector<uint8_t> interleaved = rgb_jpeg(1000, 800, false);
  for (const auto& [jpeg, multi] : {std::pair{&separate, true}, {&interleaved, false}}) {
    const JpegInfo info = parse_jpeg_frame_header(jpeg->data(), jpeg->size());
    EXPECT_FALSE(info.progressive);
    EXPECT_EQ(info.multi_scan, multi);
    EXPECT_EQ(read_jpeg_header(jpeg->data(), jpeg->size()).multi_scan, multi);
    const uint64_t bytes = decode_memory_bytes(info, {0, 0, 1000, 800}, 32, 32);
    if (multi) {
      EXPECT_GE(bytes, uint64_t{1000} * 800 * 3 * 2);
    } else {
      EXPECT_LT(bytes, uint64_t{1} << 20);
    }
  }
  const std::vector<uint8_t> progressive = rgb_jpeg(64, 48, true);
  EXPECT_TRUE(parse_jpeg_frame_header(progressive.data(), progressive.size()).multi_scan);
  // The decoder reads it as it reads any other.
  std::vector<uint8_t> out(32 * 32 * 3);
  DecodeScratch scratch;
  decode_crop_resize(separate.data(), separate.size(), {0, 0, 1000, 800}, 32, 32, false, out.data(), scratch);
}

TEST(JpegHeader, SkipsOtherSegmentsAndFillBytes) {
  std::vector<uint8_t> jpeg = rgb_jpeg(123, 45, false);
  // A large APP1 (Exif-like) segment with marker-like bytes inside, and fill bytes before the next marker.
  std::vector<uint8_t> app1 = {0xFF, 0xE1, 0x04, 0x02};
  for (int i = 0; i < 0x400; ++i) app1.push_back(i % 3 == 0 ? 0xFF : 0xC0);
  app1.insert(app1.end(), {0xFF, 0xFF, 0xFF});
  jpeg.insert(jpeg.begin() + 2, app1.begin(), app1.end());
  const JpegInfo info = parse_jpeg_frame_header(jpeg.data(), jpeg.size());
  EXPECT_EQ(info.width, 123);
  EXPECT_EQ(info.height, 45);
  EXPECT_EQ(read_jpeg_header(jpeg.data(), jpeg.size()).width, 123);  // libjpeg reads it too
}

TEST(JpegHeader, TellsProgressiveFramesByTheirMarker) {
  const std::vector<uint8_t> jpeg = rgb_jpeg(32, 24, false);
  const size_t sof = segment_offset(jpeg, 0xC0);
  ASSERT_LT(sof, jpeg.size());
  for (uint8_t marker : {0xC1, 0xC2, 0xC3, 0xC5, 0xC6, 0xC9, 0xCA, 0xCD, 0xCE, 0xCF}) {
    std::vector<uint8_t> patched = jpeg;
    patched[sof + 1] = marker;
    const JpegInfo info = parse_jpeg_frame_header(patched.data(), patched.size());
    EXPECT_EQ(info.width, 32) << std::hex << int(marker);
    EXPECT_EQ(info.progressive, marker == 0xC2 || marker == 0xC6 || marker == 0xCA || marker == 0xCE)
        << std::hex << int(marker);
    EXPECT_EQ(info.arithmetic, marker >= 0xC9) << std::hex << int(marker);  // SOF9..SOF15
  }
  const std::vector<uint8_t> pixels = test::smooth_image(32, 24);
  for (const bool progressive : {false, true}) {
    const std::vector<uint8_t> arithmetic = encode_jpeg(pixels.data(), 32, 24, 3, 90, progressive, true);
    const JpegInfo info = parse_jpeg_frame_header(arithmetic.data(), arithmetic.size());
    EXPECT_TRUE(info.arithmetic);
    EXPECT_EQ(info.progressive, progressive);
    EXPECT_EQ(info.first_scan_blocks, 0);  // no bits-per-block bound for arithmetic coding
  }
}

// libjpeg reads past stray bytes between segments (a warning, not an error); so does the marker walk, so that a
// file the CPU decoder took before still decodes.
TEST(JpegHeader, SkipsStrayBytesBetweenSegmentsAsLibjpegDoes) {
  const std::vector<uint8_t> jpeg = rgb_jpeg(64, 48, false);
  const size_t dqt = segment_offset(jpeg, 0xDB);
  ASSERT_LT(dqt, jpeg.size());
  std::vector<uint8_t> stray(jpeg.begin(), jpeg.begin() + static_cast<std::ptrdiff_t>(dqt));
  stray.insert(stray.end(), {0x12, 0x00, 0x34, 0xFF, 0x00, 0x56});  // junk, and a stuffed 0xFF 0x00
  stray.insert(stray.end(), jpeg.begin() + static_cast<std::ptrdiff_t>(dqt), jpeg.end());
  expect_same_header(stray, "stray bytes before DQT");
  std::vector<uint8_t> out(32 * 32 * 3);
  DecodeScratch scratch;
  EXPECT_NO_THROW(
      decode_crop_resize(stray.data(), stray.size(), CropRect{0, 0, 64, 48}, 32, 32, false, out.data(), scratch));
}

TEST(JpegHeader, RejectsWhatIsNotAWholeJpegWithTheCpuDecodersReasons) {
  const std::vector<uint8_t> jpeg = rgb_jpeg(64, 64, false);
  // The container checks are the CPU decoder's own: the same message.
  std::vector<uint8_t> png = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n', 0, 0, 0, 13, 'I', 'H', 'D', 'R'};
  png.resize(300, 0);
  const std::vector<uint8_t> half(jpeg.begin(), jpeg.begin() + static_cast<std::ptrdiff_t>(jpeg.size() / 2));
  std::mt19937 gen(3);
  std::vector<uint8_t> noise(500);
  for (uint8_t& b : noise) b = static_cast<uint8_t>(gen());
  noise[0] = 0x00;
  for (const auto& bytes :
       {std::vector<uint8_t>{}, png, half, noise, std::vector<uint8_t>{'G', 'I', 'F', '8', '9', 'a'}}) {
    std::string libjpeg;
    try {
      read_jpeg_header(bytes.data(), bytes.size());
    } catch (const DecodeError& e) {
      libjpeg = e.what();
    }
    EXPECT_FALSE(libjpeg.empty());
    EXPECT_EQ(error_of(bytes), libjpeg);
  }
  EXPECT_NE(error_of({}).find("empty file"), std::string::npos);
  EXPECT_NE(error_of(png).find("PNG"), std::string::npos);
  EXPECT_NE(error_of(half).find("truncated"), std::string::npos);

  // Cut inside the header, with an end-of-image marker appended: a segment runs past the end.
  const size_t sof = segment_offset(jpeg, 0xC0);
  std::vector<uint8_t> cut(jpeg.begin(), jpeg.begin() + static_cast<std::ptrdiff_t>(sof + 6));
  cut.insert(cut.end(), {0xFF, 0xD9});
  EXPECT_NE(error_of(cut).find("truncated JPEG (segment 0xFFC0 runs past the end"), std::string::npos) << error_of(cut);
  // A scan, or the end, before any frame header.
  EXPECT_NE(error_of({0xFF, 0xD8, 0xFF, 0xDA, 0x00, 0x02, 0xFF, 0xD9}).find("corrupt JPEG (marker 0xFFDA"),
            std::string::npos);
  EXPECT_NE(error_of({0xFF, 0xD8, 0xFF, 0xD9}).find("corrupt JPEG (marker 0xFFD9"), std::string::npos);
  // Garbage where a marker should be; a segment length below 2.
  // Stray bytes are skipped as libjpeg skips them; here they lead to the end-of-image marker.
  EXPECT_NE(error_of({0xFF, 0xD8, 0x12, 0x34, 0xFF, 0xD9}).find("corrupt JPEG (marker 0xFFD9"), std::string::npos);
  EXPECT_NE(error_of({0xFF, 0xD8, 0xFF, 0xE0, 0x00, 0x01, 0xFF, 0xD9}).find("has length 1"), std::string::npos);

  auto patched = [&](size_t offset, uint8_t value) {
    std::vector<uint8_t> bytes = jpeg;
    bytes[sof + offset] = value;
    return bytes;
  };
  // SOF layout: FF C0, length (2), precision, height (2), width (2), components.
  std::vector<uint8_t> no_height = patched(5, 0);
  no_height[sof + 6] = 0;
  EXPECT_NE(error_of(no_height).find("DNL"), std::string::npos);
  std::vector<uint8_t> no_width = patched(7, 0);
  no_width[sof + 8] = 0;
  EXPECT_NE(error_of(no_width).find("width 0"), std::string::npos);
  EXPECT_NE(error_of(patched(9, 2)).find("unsupported JPEG with 2 colour components"), std::string::npos);
  EXPECT_NE(error_of(patched(9, 200)).find("frame header 0xFFC0 is too short"), std::string::npos);
}

// The header parser reads only what it needs: a file whose data no decoder can use still parses (the GPU decode
// path counts such files when the device and libjpeg both fail on them).
// header_bytes ends at the first scan's header, whatever came before it (the GPU path hands nvJPEG only those
// bytes to route an image): libjpeg reads the same header from them, ended by an end-of-image marker; 0 without a
// scan.
TEST(JpegHeader, EndsTheHeadersAfterTheFirstScansHeader) {
  std::vector<uint8_t> with_app1 = rgb_jpeg(123, 45, false);
  std::vector<uint8_t> app1 = {0xFF, 0xE1, 0x00, 0x42};  // marker-like bytes inside a segment
  for (int i = 0; i < 0x40; ++i) app1.push_back(i % 2 == 0 ? 0xFF : 0xDA);
  with_app1.insert(with_app1.begin() + 2, app1.begin(), app1.end());
  const std::vector<std::pair<std::string, std::vector<uint8_t>>> files = {
      {"baseline RGB", rgb_jpeg(500, 375, false)},
      {"progressive RGB", rgb_jpeg(500, 375, true)},
      {"baseline grey", gray_jpeg(64, 48, false)},
      {"progressive grey", gray_jpeg(64, 48, true)},
      {"APP1 with marker-like bytes", with_app1}};
  for (const auto& [what, jpeg] : files) {
    SCOPED_TRACE(what);
    const JpegInfo info = parse_jpeg_frame_header(jpeg.data(), jpeg.size());
    const size_t sos = segment_offset(jpeg, 0xDA);
    ASSERT_LT(sos + 4, jpeg.size());
    EXPECT_EQ(info.header_bytes, sos + 2 + ((static_cast<size_t>(jpeg[sos + 2]) << 8) | jpeg[sos + 3]));
    std::vector<uint8_t> headers(jpeg.begin(), jpeg.begin() + static_cast<std::ptrdiff_t>(info.header_bytes));
    headers.insert(headers.end(), {0xFF, 0xD9});
    const JpegInfo again = read_jpeg_header(headers.data(), headers.size());
    EXPECT_EQ(again.width, info.width);
    EXPECT_EQ(again.height, info.height);
    EXPECT_EQ(again.components, info.components);
    EXPECT_EQ(again.progressive, info.progressive);
    // Cut before the scan's header: no scan found, the frame header still read.
    std::vector<uint8_t> no_scan(jpeg.begin(), jpeg.begin() + static_cast<std::ptrdiff_t>(sos));
    no_scan.insert(no_scan.end(), {0xFF, 0xD9});
    const JpegInfo cut = parse_jpeg_frame_header(no_scan.data(), no_scan.size());
    EXPECT_EQ(cut.header_bytes, 0u);
    EXPECT_EQ(cut.width, info.width);
  }
}

// The first scan with entropy data cut to `keep` bytes and an end-of-image marker after it.
std::vector<uint8_t> scan_cut_to(const std::vector<uint8_t>& jpeg, size_t keep) {
  const size_t start = parse_jpeg_frame_header(jpeg.data(), jpeg.size()).header_bytes;
  std::vector<uint8_t> cut(jpeg.begin(), jpeg.begin() + static_cast<std::ptrdiff_t>(start + keep));
  cut.insert(cut.end(), {0xFF, 0xD9});
  return cut;
}

// nvJPEG decodes scan data cut short without an error: check_first_scan_length refuses a Huffman-coded first scan
// with fewer bits than two per block, and takes every whole file, the most compressible (a flat image) included.
TEST(JpegHeader, RefusesAFirstScanTooShortForItsBlocks) {
  std::vector<uint8_t> flat(512 * 512 * 3, 128);
  const std::vector<uint8_t> flat_jpeg = encode_jpeg(flat.data(), 512, 512, 3, 90, false);
  const std::vector<std::pair<std::string, std::vector<uint8_t>>> files = {
      {"baseline RGB 500x375", rgb_jpeg(500, 375, false)},  // 4:2:0: 32 x 24 MCUs of 6 blocks
      {"baseline grey 64x48", gray_jpeg(64, 48, false)},    // 8 x 6 blocks
      {"flat RGB 512x512", flat_jpeg}};
  const int64_t blocks[] = {32 * 24 * 6, 8 * 6, 32 * 32 * 6};
  for (size_t i = 0; i < files.size(); ++i) {
    const auto& [what, jpeg] = files[i];
    SCOPED_TRACE(what);
    EXPECT_EQ(scan_error_of(jpeg), "");
    EXPECT_EQ(parse_jpeg_frame_header(jpeg.data(), jpeg.size()).first_scan_blocks, blocks[i]);
    const auto least = static_cast<size_t>((2 * blocks[i] + 7) / 8);  // bytes the scan needs at the very least
    const std::vector<uint8_t> too_short = scan_cut_to(jpeg, least - 1);
    const std::string error = scan_error_of(too_short);
    EXPECT_NE(error.find("cannot hold its " + std::to_string(blocks[i]) + " blocks"), std::string::npos) << error;
    EXPECT_EQ(error_of(too_short), "");  // the walk itself still reads the header
    EXPECT_EQ(scan_error_of(scan_cut_to(jpeg, least)), "");
  }
  // Progressive scans code a part of each block (and may be far shorter): not checked.
  EXPECT_EQ(scan_error_of(scan_cut_to(rgb_jpeg(500, 375, true), 8)), "");
}

TEST(JpegHeader, ParsesTheHeaderOfAFileThatDoesNotDecode) {
  const std::vector<uint8_t> bad = test::undefined_table_jpeg(rgb_jpeg(64, 48, false));
  EXPECT_EQ(parse_jpeg_frame_header(bad.data(), bad.size()).width, 64);
  std::vector<uint8_t> out(32 * 32 * 3);
  DecodeScratch scratch;
  try {
    decode_crop_resize(bad.data(), bad.size(), {0, 0, 64, 48}, 32, 32, false, out.data(), scratch);
    ADD_FAILURE() << "decoded a file without its quantisation table";
  } catch (const DecodeError& e) {
    EXPECT_NE(std::string(e.what()).find("Quantization table 0x03 was not defined"), std::string::npos) << e.what();
  }
}

TEST(JpegHeader, TellsRgbCodedFramesAsLibjpegDoes) {
  const std::vector<uint8_t> rgb_coded = test::rgb_coded_jpeg(40, 24);
  const std::vector<uint8_t> ycbcr = rgb_jpeg(40, 24, false);  // JFIF marker, ids 1, 2, 3
  ASSERT_LT(segment_offset(rgb_coded, 0xEE), rgb_coded.size()) << "libjpeg wrote no Adobe marker";
  ASSERT_LT(segment_offset(ycbcr, 0xE0), ycbcr.size()) << "libjpeg wrote no JFIF marker";
  struct Case {
    const char* name;
    std::vector<uint8_t> jpeg;
  };
  const Case cases[] = {
      {"RGB with its Adobe marker", rgb_coded},
      {"RGB without it: the ids decide", without_segment(rgb_coded, segment_offset(rgb_coded, 0xEE))},
      {"YCbCr with JFIF", ycbcr},
      {"YCbCr without JFIF: the ids decide", without_segment(ycbcr, segment_offset(ycbcr, 0xE0))},
      {"grey", gray_jpeg(40, 24, false)},
  };
  int rgb_seen = 0;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const bool libjpeg = libjpeg_reads_rgb(c.jpeg);
    EXPECT_EQ(parse_jpeg_frame_header(c.jpeg.data(), c.jpeg.size()).rgb_coded, libjpeg);
    rgb_seen += libjpeg ? 1 : 0;
  }
  EXPECT_EQ(rgb_seen, 2);  // both RGB files, neither YCbCr one: the cases test both answers
}

}  // namespace
}  // namespace rn50::codecs
