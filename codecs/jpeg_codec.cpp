// codecs/jpeg_codec.cpp: region decoding at reduced DCT scale and JPEG encoding with libjpeg-turbo; libjpeg
// errors come back through setjmp/longjmp and leave as rn50::DecodeError.
#include "codecs/jpeg_codec.h"

#include <algorithm>
#include <csetjmp>
#include <cstdio>  // jpeglib.h uses FILE without including stdio.h
#include <cstring>
#include <stdexcept>
#include <string>

#include <jpeglib.h>
// After jpeglib.h: jerror.h picks its message list by JPEG_LIB_VERSION, which jpeglib.h defines.
#include <jerror.h>
#include <opencv2/core.hpp>
#include <opencv2/imgproc.hpp>

#include "core/errors.h"

namespace rn50::codecs {
namespace {

// libjpeg reports errors through this; `pub` must stay the first member because libjpeg hands back a
// pointer to it.
struct JpegErrorManager {
  jpeg_error_mgr pub;
  std::jmp_buf jump;
  bool premature_end;  // also an arithmetic-coded scan whose data ends too early (check_arithmetic_scans)
  bool corrupt;
  bool in_data;  // past the header: stray bytes there are damage, not the header padding libjpeg skips
  char message[JMSG_LENGTH_MAX];
};

[[noreturn]] void jump_on_error(j_common_ptr cinfo) {
  auto* err = reinterpret_cast<JpegErrorManager*>(cinfo->err);
  (*cinfo->err->format_message)(cinfo, err->message);
  std::longjmp(err->jump, 1);
}

// libjpeg's warnings that the data itself is damaged: it goes on decoding, with grey or garbage where the data was.
bool corrupt_data_warning(int code) {
  switch (code) {
    case JWRN_HIT_MARKER:       // premature end of a data segment
    case JWRN_EXTRANEOUS_DATA:  // bytes before a marker that belong to nothing
    case JWRN_HUFF_BAD_CODE:
    case JWRN_MUST_RESYNC:
#if JPEG_LIB_VERSION >= 70 || defined(C_ARITH_CODING_SUPPORTED) || defined(D_ARITH_CODING_SUPPORTED)
    case JWRN_ARITH_BAD_CODE:
#endif
      return true;
    default:
      return false;
  }
}

// Warnings (level -1) are counted silently, except those about damaged data and a premature end of the file: a
// damaged or truncated file must not pass as an image padded with grey. Trace messages (level >= 0) are ignored.
void on_message(j_common_ptr cinfo, int msg_level) {
  if (msg_level >= 0) return;
  auto* err = reinterpret_cast<JpegErrorManager*>(cinfo->err);
  if (cinfo->err->msg_code == JWRN_JPEG_EOF) {
    err->premature_end = true;
    jump_on_error(cinfo);
  }
  const bool header_padding = cinfo->err->msg_code == JWRN_EXTRANEOUS_DATA && !err->in_data;
  if (corrupt_data_warning(cinfo->err->msg_code) && !header_padding) {
    err->corrupt = true;
    jump_on_error(cinfo);
  }
  cinfo->err->num_warnings++;
}

void install_error_manager(JpegErrorManager& err, jpeg_error_mgr*& slot) {
  slot = jpeg_std_error(&err.pub);
  err.pub.error_exit = &jump_on_error;
  err.pub.emit_message = &on_message;
  err.premature_end = false;
  err.corrupt = false;
  err.in_data = false;
  err.message[0] = '\0';
}

// Runs `fn`, which calls libjpeg, with a landing point for libjpeg's longjmp. Returns false when libjpeg
// failed. Neither this frame nor `fn` may own objects with destructors while libjpeg runs, since longjmp
// skips them; callers keep such objects in their own frames, above this one.
template <class Fn>
bool run_guarded(JpegErrorManager& err, Fn& fn) {
  if (setjmp(err.jump) != 0) return false;
  fn();
  return true;
}

std::string libjpeg_reason(const JpegErrorManager& err) {
  if (err.premature_end) return std::string("truncated JPEG (") + err.message + ")";
  if (err.corrupt) return std::string("damaged JPEG data (") + err.message + ")";
  return std::string("corrupt or unsupported JPEG (") + err.message + ")";
}

// Owns one jpeg_decompress_struct; every libjpeg call goes through run(), which turns errors into DecodeError.
class Decompressor {
 public:
  Decompressor() {
    install_error_manager(err_, cinfo_.err);
    auto create = [this] { jpeg_create_decompress(&cinfo_); };
    if (!run_guarded(err_, create)) throw DecodeError(libjpeg_reason(err_));
    created_ = true;
  }
  ~Decompressor() {
    if (created_) jpeg_destroy_decompress(&cinfo_);
  }
  Decompressor(const Decompressor&) = delete;
  Decompressor& operator=(const Decompressor&) = delete;

  j_decompress_ptr get() { return &cinfo_; }
  // Called once the header is read: from here on, stray bytes before a marker are damaged data.
  void entered_data() { err_.in_data = true; }

  template <class Fn>
  void run(Fn fn) {
    if (!run_guarded(err_, fn)) throw DecodeError(libjpeg_reason(err_));
  }

 private:
  jpeg_decompress_struct cinfo_{};
  JpegErrorManager err_{};
  bool created_ = false;
};

// check_arithmetic_scans' progress monitor, which libjpeg calls before each row of blocks it reads into a multi-scan
// image and before each output row of a single-scan one (without fancy upsampling, which would decode a row ahead).
// The arithmetic decoder keeps the marker it ran into in unread_marker (a restart marker comes inside a scan and is
// read at its next restart interval). Only scans that code the DC coefficients afresh are checked (every
// sequential scan; a progressive file's first DC scans): those code every block, while a progressive AC or refinement
// scan of a smooth picture can be a few bytes for the whole image. A whole scan runs into its marker near its end,
// where the decoder reads a few bytes past the data: in its last row of blocks, or its last 8 blocks when rows are
// narrower than that (a row of one block can code in less than those bytes). 2,500 random valid files (1 to 400
// pixels a side, grey and colour, sequential and progressive) all pass; every sequential one cut in half is refused.
void check_arithmetic_progress(j_common_ptr common) {
  const auto cinfo = reinterpret_cast<j_decompress_ptr>(common);
  const int marker = cinfo->unread_marker;
  if (marker == 0 || (marker >= 0xD0 && marker <= 0xD7) || !cinfo->arith_code || cinfo->Ss != 0 || cinfo->Ah != 0)
    return;
  const JDIMENSION per_row = std::max<JDIMENSION>(1, cinfo->MCUs_per_row);
  const JDIMENSION slack = std::max<JDIMENSION>(1, (8 + per_row - 1) / per_row);
  if (cinfo->input_iMCU_row + slack > cinfo->total_iMCU_rows) return;
  auto* err = reinterpret_cast<JpegErrorManager*>(cinfo->err);
  std::snprintf(err->message, sizeof err->message,
                "the arithmetic-coded data ends %u of %u rows of blocks before its scan does",
                static_cast<unsigned>(cinfo->total_iMCU_rows - cinfo->input_iMCU_row),
                static_cast<unsigned>(cinfo->total_iMCU_rows));
  err->premature_end = true;
  std::longjmp(err->jump, 1);
}

std::string hex_byte(uint8_t value) {
  char text[8];
  std::snprintf(text, sizeof text, "0x%02X", static_cast<unsigned>(value));
  return text;
}

void read_header(Decompressor& decompressor, const uint8_t* bytes, size_t size) {
  j_decompress_ptr cinfo = decompressor.get();
  decompressor.run([&] {
    // jpeg_mem_src takes a non-const pointer in the libjpeg 8 API; it never writes through it.
    jpeg_mem_src(cinfo, const_cast<unsigned char*>(bytes), static_cast<unsigned long>(size));
    jpeg_read_header(cinfo, TRUE);
  });
  decompressor.entered_data();
  const int components = cinfo->num_components;
  if (components != 1 && components != 3 && components != 4)
    throw DecodeError("unsupported JPEG with " + std::to_string(components) + " colour components");
}

// Rounds v * num / 8 to the nearest integer (halves up), in exact integer arithmetic.
int64_t scale_coordinate(int64_t v, int num) { return (v * num * 2 + 8) / 16; }

// CMYK -> RGB. Adobe (Photoshop) files store inverted CMYK, where 255 means no ink.
void cmyk_to_rgb(const uint8_t* src, size_t src_stride, int width, int height, bool inverted, uint8_t* dst) {
  for (int y = 0; y < height; ++y) {
    const uint8_t* s = src + static_cast<size_t>(y) * src_stride;
    uint8_t* d = dst + static_cast<size_t>(y) * width * 3;
    for (int x = 0; x < width; ++x, s += 4, d += 3) {
      const unsigned c = inverted ? s[0] : 255u - s[0];
      const unsigned m = inverted ? s[1] : 255u - s[1];
      const unsigned yel = inverted ? s[2] : 255u - s[2];
      const unsigned k = inverted ? s[3] : 255u - s[3];
      d[0] = static_cast<uint8_t>((c * k + 127) / 255);
      d[1] = static_cast<uint8_t>((m * k + 127) / 255);
      d[2] = static_cast<uint8_t>((yel * k + 127) / 255);
    }
  }
}

void mirror_rows(uint8_t* image, int width, int height) {
  for (int y = 0; y < height; ++y) {
    uint8_t* left = image + static_cast<size_t>(y) * width * 3;
    uint8_t* right = left + static_cast<size_t>(width - 1) * 3;
    for (; left < right; left += 3, right -= 3) {
      std::swap(left[0], right[0]);
      std::swap(left[1], right[1]);
      std::swap(left[2], right[2]);
    }
  }
}

// Encoder output straight into a std::vector; `pub` first, as libjpeg expects.
struct VectorDestination {
  jpeg_destination_mgr pub;
  std::vector<uint8_t>* out;
};

// Grows the vector to `new_size` and points libjpeg at the new part. No exception may cross libjpeg's frames,
// so allocation failure becomes a libjpeg error.
void grow_destination(j_compress_ptr cinfo, size_t new_size) {
  auto* dest = reinterpret_cast<VectorDestination*>(cinfo->dest);
  const size_t used = dest->out->size();
  bool grown = true;
  try {
    dest->out->resize(new_size);
  } catch (...) {
    grown = false;
  }
  if (!grown) ERREXIT1(cinfo, JERR_OUT_OF_MEMORY, 0);
  dest->pub.next_output_byte = dest->out->data() + used;
  dest->pub.free_in_buffer = new_size - used;
}

void init_destination(j_compress_ptr cinfo) {
  auto* dest = reinterpret_cast<VectorDestination*>(cinfo->dest);
  const size_t pixels = static_cast<size_t>(cinfo->image_width) * cinfo->image_height * cinfo->input_components;
  dest->out->clear();
  grow_destination(cinfo, std::max<size_t>(pixels / 4, 4096));
}

boolean empty_output_buffer(j_compress_ptr cinfo) {
  auto* dest = reinterpret_cast<VectorDestination*>(cinfo->dest);
  grow_destination(cinfo, dest->out->size() * 2);  // libjpeg calls this only when the buffer is full
  return TRUE;
}

void term_destination(j_compress_ptr cinfo) {
  auto* dest = reinterpret_cast<VectorDestination*>(cinfo->dest);
  dest->out->resize(dest->out->size() - dest->pub.free_in_buffer);
}

}  // namespace

namespace detail {
int choose_scale_num(int rect_width, int rect_height, int out_width, int out_height) {
  // Only 1/8, 2/8, 4/8 and 8/8 have SIMD IDCTs in libjpeg-turbo; 3/8 is slower than 4/8 and 5/8..7/8 are about
  // twice as slow as a full-size decode, so each of those is beaten by the next scale up.
  for (int num = 1; num < 8; num *= 2) {
    if (static_cast<int64_t>(rect_width) * num >= static_cast<int64_t>(out_width) * 8 &&
        static_cast<int64_t>(rect_height) * num >= static_cast<int64_t>(out_height) * 8)
      return num;
  }
  return 8;
}

int scaled_size(int size, int num) { return static_cast<int>((static_cast<int64_t>(size) * num + 7) / 8); }

void scale_range(int begin, int length, int num, int scaled_size, int& scaled_begin, int& scaled_end) {
  int64_t b = scale_coordinate(begin, num);
  int64_t e = scale_coordinate(static_cast<int64_t>(begin) + length, num);
  e = std::min<int64_t>(e, scaled_size);
  b = std::min<int64_t>(b, scaled_size - 1);
  if (e <= b) e = b + 1;
  scaled_begin = static_cast<int>(b);
  scaled_end = static_cast<int>(e);
}
}  // namespace detail

// Before libjpeg sees the data, so that the common failures get a plain reason, and so that a truncated file is
// caught even when region decoding stops before the end of the data.
void check_jpeg_container(const uint8_t* bytes, size_t size) {
  if (size == 0 || bytes == nullptr) throw DecodeError("empty file");
  static constexpr uint8_t kPng[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
  if (size >= sizeof kPng && std::memcmp(bytes, kPng, sizeof kPng) == 0)
    throw DecodeError("not a JPEG: the data is a PNG image");
  if (size >= 4 && std::memcmp(bytes, "GIF8", 4) == 0) throw DecodeError("not a JPEG: the data is a GIF image");
  if (size < 2 || bytes[0] != 0xFF || bytes[1] != 0xD8) {
    std::string first = hex_byte(bytes[0]);
    if (size >= 2) first += " " + hex_byte(bytes[1]);
    throw DecodeError("not a JPEG: no start-of-image marker (starts with " + first + ")");
  }
  // An end-of-image marker after the start-of-image one, with any number of bytes after it (cameras append trailers
  // of kilobytes; libjpeg stops at the marker). The search runs from the end, so a normal file stops at once.
  if (last_end_of_image(bytes, size) == 0) throw DecodeError("truncated JPEG (no end-of-image marker)");
}

size_t last_end_of_image(const uint8_t* bytes, size_t size) {
  for (size_t i = size; i >= 4; --i) {
    if (bytes[i - 2] == 0xFF && bytes[i - 1] == 0xD9) return i - 2;
  }
  return 0;
}

JpegInfo read_jpeg_header(const uint8_t* bytes, size_t size) {
  check_jpeg_container(bytes, size);
  Decompressor decompressor;
  read_header(decompressor, bytes, size);
  const j_decompress_ptr cinfo = decompressor.get();
  JpegInfo info;
  info.width = static_cast<int>(cinfo->image_width);
  info.height = static_cast<int>(cinfo->image_height);
  info.components = cinfo->num_components;
  info.progressive = cinfo->progressive_mode != 0;
  info.multi_scan = jpeg_has_multiple_scans(cinfo) != 0;
  return info;
}

uint64_t decode_memory_bytes(const JpegInfo& info, const CropRect& rect, int out_width, int out_height) {
  const int num = detail::choose_scale_num(rect.width, rect.height, out_width, out_height);
  const auto width = static_cast<uint64_t>(detail::scaled_size(info.width, num));
  // jpeg_crop_scanline widens the columns to whole iMCUs: up to 32 scaled pixels more (4:2:0 at full scale).
  const uint64_t region =
      (std::min<uint64_t>(width, static_cast<uint64_t>(detail::scaled_size(rect.width, num)) + 32)) *
      static_cast<uint64_t>(detail::scaled_size(rect.height, num));
  const uint64_t channels = info.components == 4 ? 4 + 3 : 3;
  const uint64_t components = static_cast<uint64_t>(std::max(1, info.components));
  const uint64_t rows = width * 32 * components;  // a row group of each component, with its context rows
  const uint64_t coefficients =
      info.progressive || info.multi_scan
          ? static_cast<uint64_t>(info.width) * static_cast<uint64_t>(info.height) * components * 2
          : 0;
  return region * channels + rows + coefficients;
}

void check_arithmetic_scans(const uint8_t* bytes, size_t size) {
  check_jpeg_container(bytes, size);
  Decompressor decompressor;
  read_header(decompressor, bytes, size);
  const j_decompress_ptr cinfo = decompressor.get();
  if (!cinfo->arith_code) return;
  jpeg_progress_mgr progress{};
  progress.progress_monitor = &check_arithmetic_progress;
  cinfo->progress = &progress;
  cinfo->scale_num = 1;  // the fewest pixels: the work is the entropy decoding
  cinfo->scale_denom = 8;
  cinfo->do_fancy_upsampling = FALSE;
  cinfo->dct_method = JDCT_IFAST;
  // A multi-scan file is read whole, row by row of blocks, inside jpeg_start_decompress; a single scan as its rows
  // are read. One row at a time (the monitor runs before each call).
  decompressor.run([&] { jpeg_start_decompress(cinfo); });
  std::vector<uint8_t> row(static_cast<size_t>(cinfo->output_width) * cinfo->output_components);
  decompressor.run([&] {
    JSAMPROW rows[1] = {row.data()};
    while (cinfo->output_scanline < cinfo->output_height) {
      if (jpeg_read_scanlines(cinfo, rows, 1) != 1) break;
    }
    jpeg_abort_decompress(cinfo);
  });
}

void decode_crop_resize(const uint8_t* bytes, size_t size, const CropRect& rect, int out_width, int out_height,
                        bool flip, uint8_t* out, DecodeScratch& scratch) {
  if (out_width <= 0 || out_height <= 0 || out == nullptr)
    throw std::invalid_argument("decode_crop_resize: output must be a non-empty image");
  check_jpeg_container(bytes, size);

  Decompressor decompressor;
  read_header(decompressor, bytes, size);
  const j_decompress_ptr cinfo = decompressor.get();
  const int image_width = static_cast<int>(cinfo->image_width);
  const int image_height = static_cast<int>(cinfo->image_height);
  if (rect.width <= 0 || rect.height <= 0 || rect.x < 0 || rect.y < 0 || rect.x + rect.width > image_width ||
      rect.y + rect.height > image_height)
    throw std::invalid_argument("decode_crop_resize: crop " + std::to_string(rect.width) + "x" +
                                std::to_string(rect.height) + "+" + std::to_string(rect.x) + "+" +
                                std::to_string(rect.y) + " is not inside the " + std::to_string(image_width) + "x" +
                                std::to_string(image_height) + " image");

  const int num = detail::choose_scale_num(rect.width, rect.height, out_width, out_height);
  const bool cmyk = cinfo->num_components == 4;
  cinfo->scale_num = static_cast<unsigned>(num);
  cinfo->scale_denom = 8;
  cinfo->out_color_space = cmyk ? JCS_CMYK : JCS_RGB;  // grayscale is expanded to RGB by libjpeg
  cinfo->dct_method = JDCT_ISLOW;
  decompressor.run([&] { jpeg_start_decompress(cinfo); });

  // The rectangle in scaled pixels; libjpeg may widen the columns to an iMCU boundary.
  int x0 = 0, x1 = 0, y0 = 0, y1 = 0;
  detail::scale_range(rect.x, rect.width, num, static_cast<int>(cinfo->output_width), x0, x1);
  detail::scale_range(rect.y, rect.height, num, static_cast<int>(cinfo->output_height), y0, y1);
  JDIMENSION crop_x = static_cast<JDIMENSION>(x0);
  JDIMENSION crop_width = static_cast<JDIMENSION>(x1 - x0);
  decompressor.run([&] { jpeg_crop_scanline(cinfo, &crop_x, &crop_width); });

  const int channels = cinfo->out_color_components;
  const size_t stride = static_cast<size_t>(crop_width) * channels;
  const int rows = y1 - y0;
  scratch.rows.resize(stride * rows);  // grows to the largest region seen, then stays
  uint8_t* const row_data = scratch.rows.data();
  bool stalled = false;
  decompressor.run([&] {
    if (y0 > 0) jpeg_skip_scanlines(cinfo, static_cast<JDIMENSION>(y0));
    while (cinfo->output_scanline < static_cast<JDIMENSION>(y1)) {
      JSAMPROW row = row_data + (cinfo->output_scanline - static_cast<JDIMENSION>(y0)) * stride;
      if (jpeg_read_scanlines(cinfo, &row, 1) != 1) {
        stalled = true;
        break;
      }
    }
    // Rows below the rectangle are never decoded; a full read finishes normally, checking the rest.
    if (cinfo->output_scanline < cinfo->output_height)
      jpeg_abort_decompress(cinfo);
    else
      jpeg_finish_decompress(cinfo);
  });
  if (stalled) throw DecodeError("corrupt JPEG (decoder returned no rows)");

  const int region_width = x1 - x0;
  const size_t column_offset = static_cast<size_t>(x0 - static_cast<int>(crop_x)) * channels;
  cv::Mat region;
  if (cmyk) {
    scratch.region.resize(static_cast<size_t>(region_width) * rows * 3);
    cmyk_to_rgb(row_data + column_offset, stride, region_width, rows, cinfo->saw_Adobe_marker != 0,
                scratch.region.data());
    region = cv::Mat(rows, region_width, CV_8UC3, scratch.region.data());
  } else {
    region = cv::Mat(rows, region_width, CV_8UC3, row_data + column_offset, stride);
  }

  cv::Mat destination(out_height, out_width, CV_8UC3, out);  // a header on the caller's buffer, no copy
  const bool shrinking = region_width >= out_width && rows >= out_height;
  const bool shrinking_2x = region_width >= 2 * out_width || rows >= 2 * out_height;
  const int interpolation = shrinking && shrinking_2x ? cv::INTER_AREA : cv::INTER_LINEAR;
  cv::resize(region, destination, destination.size(), 0, 0, interpolation);
  if (destination.data != out) throw std::logic_error("decode_crop_resize: cv::resize reallocated the output");
  if (flip) mirror_rows(out, out_width, out_height);
}

std::vector<uint8_t> encode_jpeg(const uint8_t* pixels, int width, int height, int channels, int quality,
                                 bool progressive, bool arithmetic) {
  if (pixels == nullptr || width <= 0 || height <= 0)
    throw std::invalid_argument("encode_jpeg: the image must not be empty");
  if (channels != 1 && channels != 3) throw std::invalid_argument("encode_jpeg: channels must be 1 or 3");
  if (quality < 1 || quality > 100) throw std::invalid_argument("encode_jpeg: quality must be in 1..100");

  std::vector<uint8_t> encoded;
  jpeg_compress_struct cinfo{};
  JpegErrorManager err{};
  install_error_manager(err, cinfo.err);
  VectorDestination dest{};
  dest.out = &encoded;
  dest.pub.init_destination = &init_destination;
  dest.pub.empty_output_buffer = &empty_output_buffer;
  dest.pub.term_destination = &term_destination;
  bool created = false;

  auto compress = [&] {
    jpeg_create_compress(&cinfo);
    created = true;
    cinfo.dest = &dest.pub;
    cinfo.image_width = static_cast<JDIMENSION>(width);
    cinfo.image_height = static_cast<JDIMENSION>(height);
    cinfo.input_components = channels;
    cinfo.in_color_space = channels == 3 ? JCS_RGB : JCS_GRAYSCALE;
    jpeg_set_defaults(&cinfo);
    jpeg_set_quality(&cinfo, quality, TRUE);
    if (progressive) jpeg_simple_progression(&cinfo);
    cinfo.arith_code = arithmetic ? TRUE : FALSE;
    jpeg_start_compress(&cinfo, TRUE);
    const size_t stride = static_cast<size_t>(width) * channels;
    while (cinfo.next_scanline < cinfo.image_height) {
      // libjpeg's row type is non-const; the encoder only reads the rows.
      JSAMPROW row = const_cast<JSAMPROW>(pixels + cinfo.next_scanline * stride);
      jpeg_write_scanlines(&cinfo, &row, 1);
    }
    jpeg_finish_compress(&cinfo);
  };
  const bool ok = run_guarded(err, compress);
  if (created) jpeg_destroy_compress(&cinfo);
  if (!ok) throw std::runtime_error(std::string("JPEG encoding failed: ") + err.message);
  return encoded;
}

}  // namespace rn50::codecs
