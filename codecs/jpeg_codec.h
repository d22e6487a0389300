// codecs/jpeg_codec.h: JPEG decoding of one region at reduced DCT scale (libjpeg-turbo), and JPEG encoding.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace rn50::codecs {

struct JpegInfo {
  int width = 0;
  int height = 0;
  int components = 0;  // 1 gray, 3 YCbCr/RGB, 4 CMYK/YCCK
  bool progressive = false;
  // libjpeg holds the whole image's coefficients while it decodes: a progressive file, or a sequential one whose first
  // scan carries fewer components than the frame (a scan per component), as libjpeg decides it (jdinput.c). The walk
  // assumes it where it finds no scan header.
  bool multi_scan = false;
  bool arithmetic = false;  // arithmetic-coded (SOF9..SOF15) rather than Huffman-coded (set by the frame-header walk)
  // 3 components stored as R, G, B rather than YCbCr, as libjpeg decides it: no JFIF marker, and an Adobe marker
  // with transform 0 or, without one, component ids 'R', 'G', 'B'. (Set by the frame-header walk only.)
  bool rgb_coded = false;
  // The bytes up to the end of the first scan's header (its SOS segment): every table and header a decoder reads
  // before the entropy-coded data; 0 when the walk finds no scan. (Set by the frame-header walk only.)
  size_t header_bytes = 0;
  // A Huffman-coded sequential first scan's 8x8 blocks and the bytes of entropy-coded data after its header (0, 0
  // when the walk cannot tell: progressive, arithmetic, no scan). (Set by the frame-header walk only.)
  int64_t first_scan_blocks = 0;
  size_t first_scan_bytes = 0;
};

// A rectangle in source-image pixels; always inside the image.
struct CropRect {
  int x = 0;
  int y = 0;
  int width = 0;
  int height = 0;
};

// Reusable per-thread buffers, so that steady-state decoding allocates nothing.
struct DecodeScratch {
  std::vector<uint8_t> rows;    // decoded region (scaled), RGB or CMYK
  std::vector<uint8_t> region;  // RGB region before the final resize
};

// Reads the header only. Throws rn50::DecodeError on anything that is not a readable JPEG.
JpegInfo read_jpeg_header(const uint8_t* bytes, size_t size);

// The cheap checks every decoder path runs first: not empty, not a PNG or GIF, a start-of-image marker at the
// front and an end-of-image marker after it, with any bytes after that (a truncated file has none). Throws
// rn50::DecodeError.
void check_jpeg_container(const uint8_t* bytes, size_t size);

// Where the last end-of-image marker (FF D9) starts; 0 when there is none after the start-of-image marker.
size_t last_end_of_image(const uint8_t* bytes, size_t size);

// Decodes `rect` of the image into an out_width x out_height RGB image (HWC, uint8) at `out`, mirrored
// horizontally when `flip`. Only the rows and columns of the rectangle are decoded, at the smallest DCT
// scale (1/8, 1/4, 1/2 or 1: the fast ones) that still leaves the rectangle at least as large as the
// output; one bilinear (or, when still shrinking 2x or more, area) resize makes the rest. Grayscale and
// CMYK/YCCK inputs come out as RGB. Throws rn50::DecodeError for truncated or corrupt data.
void decode_crop_resize(const uint8_t* bytes, size_t size, const CropRect& rect, int out_width, int out_height,
                        bool flip, uint8_t* out, DecodeScratch& scratch);

// Throws rn50::DecodeError when the data of an arithmetic-coded JPEG ends (reaches a marker) a whole row of blocks
// (an iMCU row, at least 8 blocks) or more before a scan that codes every block's DC coefficient is complete: every
// scan of a sequential file, the first DC scans of a progressive one (whose later scans may be nearly empty, so a cut
// there goes unseen, the picture complete at a lower quality). The arithmetic decoder goes on after a marker as if
// zero bytes followed, as the standard lets it and without a warning, so a file cut short and closed with an
// end-of-image marker decodes without an error (its lower part flat). Entropy-decodes the whole file at 1/8 scale; a
// Huffman-coded file passes unread. Bytes cannot tell such a file from one whose last rows the encoder coded in no
// bytes at all (it drops trailing zero bytes: a band of flat rows at the bottom), which is refused too.
void check_arithmetic_scans(const uint8_t* bytes, size_t size);

// The bytes decode_crop_resize holds for `rect` of an image with header `info` decoded to out_width x out_height,
// known before decoding: the region at its DCT scale (RGB, or CMYK and its RGB copy), libjpeg's rows of the whole
// width at that scale, and for a multi-scan file libjpeg's coefficients of the whole image (2 bytes a sample, each
// component counted at full resolution: 1 GB for a 13000x13000 colour image, whatever the scale). An upper bound,
// for the decode budget (data/decode_budget.h); check_arithmetic_scans holds no more.
uint64_t decode_memory_bytes(const JpegInfo& info, const CropRect& rect, int out_width, int out_height);

// Encodes an RGB (HWC) or, when `channels` is 1, grayscale image; `arithmetic`: arithmetic coding instead of Huffman.
std::vector<uint8_t> encode_jpeg(const uint8_t* pixels, int width, int height, int channels, int quality,
                                 bool progressive = false, bool arithmetic = false);

namespace detail {
// The DCT scale numerator M (scale M/8, M in 1, 2, 4, 8) that decode_crop_resize uses: the smallest M at which
// a rect_width x rect_height region is still at least out_width x out_height; 8 when even full size is smaller.
int choose_scale_num(int rect_width, int rect_height, int out_width, int out_height);
// libjpeg's side length of a `size`-pixel side decoded at scale num/8 (rounded up).
int scaled_size(int size, int num);
// Maps [begin, begin + length) of the source onto the image scaled by num/8 (scaled_size pixels), as
// decode_crop_resize does: [scaled_begin, scaled_end), never empty.
void scale_range(int begin, int length, int num, int scaled_size, int& scaled_begin, int& scaled_end);
}  // namespace detail

}  // namespace rn50::codecs
