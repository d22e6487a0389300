// codecs/jpeg_header.cpp: the marker walk from the start-of-image marker to the first start-of-frame segment, on to
// the end of the first scan's header, and whether that scan's data can hold its blocks.
#include "codecs/jpeg_header.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>

#include "core/errors.h"

namespace rn50::codecs {
namespace {

std::string marker_name(uint8_t marker) {
  char text[8];
  std::snprintf(text, sizeof text, "0xFF%02X", static_cast<unsigned>(marker));
  return text;
}

int read_u16(const uint8_t* p) { return (p[0] << 8) | p[1]; }

// SOF0..SOF15 without DHT (C4), JPG (C8) and DAC (CC), which share the range.
bool is_start_of_frame(uint8_t marker) {
  return marker >= 0xC0 && marker <= 0xCF && marker != 0xC4 && marker != 0xC8 && marker != 0xCC;
}

// SOF2, SOF6, SOF10 and SOF14 are the progressive processes (Huffman and arithmetic, plain and differential).
bool is_progressive(uint8_t marker) { return (marker & 0x03) == 0x02; }

// From `pos`, the next marker that starts a segment, `pos` then just after it; -1 when the data ends first. Stray
// bytes before a marker, fill bytes, 0xFF 0x00 and the markers without a length (TEM, RSTn) are skipped, as libjpeg
// skips them (with a warning), so that both decode paths take the files the CPU decoder takes.
int next_marker(const uint8_t* bytes, size_t size, size_t& pos) {
  for (;;) {
    while (pos < size && bytes[pos] != 0xFF) ++pos;
    while (pos < size && bytes[pos] == 0xFF) ++pos;
    if (pos >= size) return -1;
    const uint8_t marker = bytes[pos++];
    if (marker == 0x00 || marker == 0x01 || (marker >= 0xD0 && marker <= 0xD7)) continue;
    return marker;
  }
}

// From `pos`, a segment boundary after the frame header: the end of the first SOS segment, or 0 when the data
// ends or breaks before one (the frame header is what callers need; this never throws). `sos`: where that segment's
// length field starts.
size_t scan_header_end(const uint8_t* bytes, size_t size, size_t pos, size_t* sos) {
  for (;;) {
    const int marker = next_marker(bytes, size, pos);
    if (marker < 0 || marker == 0xD8 || marker == 0xD9 || pos + 2 > size) return 0;
    const size_t length = static_cast<size_t>(read_u16(bytes + pos));
    if (length < 2 || length > size - pos) return 0;
    *sos = pos;
    pos += length;
    if (marker == 0xDA) return pos;
  }
}

// SOF0 (baseline) and SOF1 (extended sequential): Huffman-coded, one scan after another.
bool is_huffman_sequential(uint8_t marker) { return marker == 0xC0 || marker == 0xC1; }

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// The fewest 8x8 blocks the first scan codes, from the frame's sampling factors and the scan header at `sos` (its
// length field); 0 when the headers do not say (the caller then checks nothing).
int64_t first_scan_blocks(const uint8_t* frame, size_t frame_length, const uint8_t* bytes, size_t sos, size_t end,
                          int width, int height) {
  const int n = frame[7];
  if (frame_length < 8 + 3 * static_cast<size_t>(n) || sos + 3 > end) return 0;
  int hmax = 1, vmax = 1;
  for (int c = 0; c < n; ++c) {
    hmax = std::max(hmax, frame[9 + 3 * c] >> 4);
    vmax = std::max(vmax, frame[9 + 3 * c] & 15);
  }
  const int ns = bytes[sos + 2];
  if (ns < 1 || sos + 3 + 2 * static_cast<size_t>(ns) > end) return 0;
  auto factors = [&](int id, int* h, int* v) {
    for (int c = 0; c < n; ++c) {
      if (frame[8 + 3 * c] == id) {
        *h = std::max(1, frame[9 + 3 * c] >> 4);
        *v = std::max(1, frame[9 + 3 * c] & 15);
        return true;
      }
    }
    return false;
  };
  if (ns == 1) {  // one component, not interleaved: its own blocks, by its share of the frame
    int h = 1, v = 1;
    if (!factors(bytes[sos + 3], &h, &v)) return 0;
    return ceil_div(ceil_div(static_cast<int64_t>(width) * h, hmax), 8) *
           ceil_div(ceil_div(static_cast<int64_t>(height) * v, vmax), 8);
  }
  int64_t per_mcu = 0;
  for (int k = 0; k < ns; ++k) {
    int h = 1, v = 1;
    if (!factors(bytes[sos + 3 + 2 * k], &h, &v)) return 0;
    per_mcu += h * v;
  }
  return ceil_div(width, 8 * hmax) * ceil_div(height, 8 * vmax) * per_mcu;
}

// Bytes from `pos` to the next marker that ends the entropy-coded data (stuffed 0xFF 0x00 and restart markers are
// part of it).
size_t entropy_bytes(const uint8_t* bytes, size_t size, size_t pos) {
  const size_t start = pos;
  while (pos + 1 < size) {
    if (bytes[pos] == 0xFF && bytes[pos + 1] != 0x00 && bytes[pos + 1] != 0xFF &&
        !(bytes[pos + 1] >= 0xD0 && bytes[pos + 1] <= 0xD7)) {
      break;
    }
    ++pos;
  }
  return pos - start;
}

}  // namespace

JpegInfo parse_jpeg_frame_header(const uint8_t* bytes, size_t size) {
  check_jpeg_container(bytes, size);
  size_t pos = 2;  // after the start-of-image marker
  bool jfif = false;
  int adobe_transform = -1;  // none seen
  for (;;) {
    const int next = next_marker(bytes, size, pos);
    if (next < 0) throw DecodeError("truncated JPEG (the data ends before the frame header)");
    const uint8_t marker = static_cast<uint8_t>(next);
    if (marker == 0xD8 || marker == 0xD9 || marker == 0xDA)
      throw DecodeError("corrupt JPEG (marker " + marker_name(marker) + " before the frame header)");
    if (pos + 2 > size) throw DecodeError("truncated JPEG (the data ends inside segment " + marker_name(marker) + ")");
    const size_t length = static_cast<size_t>(read_u16(bytes + pos));  // counts its own two bytes
    if (length < 2)
      throw DecodeError("corrupt JPEG (segment " + marker_name(marker) + " has length " + std::to_string(length) + ")");
    if (length > size - pos)
      throw DecodeError("truncated JPEG (segment " + marker_name(marker) + " runs past the end of the data)");
    if (!is_start_of_frame(marker)) {
      const uint8_t* data = bytes + pos + 2;  // after the length
      const size_t data_length = length - 2;
      if (marker == 0xE0 && data_length >= 14 && std::memcmp(data, "JFIF\0", 5) == 0) jfif = true;
      if (marker == 0xEE && data_length >= 12 && std::memcmp(data, "Adobe", 5) == 0) adobe_transform = data[11];
      pos += length;
      continue;
    }
    // SOFn: length, precision, height, width, component count, then 3 bytes per component.
    const uint8_t* frame = bytes + pos;
    if (length < 8 || length < 8 + 3 * static_cast<size_t>(frame[7]))
      throw DecodeError("corrupt JPEG (frame header " + marker_name(marker) + " is too short)");
    JpegInfo info;
    info.height = read_u16(frame + 3);
    info.width = read_u16(frame + 5);
    info.components = frame[7];
    info.progressive = is_progressive(marker);
    info.arithmetic = marker > 0xC8;  // SOF9..SOF15 (DAC, 0xCC, is no frame header)
    if (info.width == 0) throw DecodeError("corrupt JPEG (frame header gives width 0)");
    if (info.height == 0) throw DecodeError("unsupported JPEG (height defined by a DNL marker)");
    if (info.components != 1 && info.components != 3 && info.components != 4)
      throw DecodeError("unsupported JPEG with " + std::to_string(info.components) + " colour components");
    if (info.components == 3 && !jfif) {  // libjpeg's jdapimin.c default_decompress_parms
      const bool rgb_ids = frame[8] == 'R' && frame[11] == 'G' && frame[14] == 'B';
      info.rgb_coded = adobe_transform >= 0 ? adobe_transform == 0 : rgb_ids;
    }
    size_t sos = 0;
    info.header_bytes = scan_header_end(bytes, size, pos + length, &sos);
    // The first scan's component count (the byte after its length) against the frame's, as libjpeg decides it.
    info.multi_scan = info.progressive || info.header_bytes < sos + 3 || bytes[sos + 2] < info.components;
    // An end-of-image marker inside the header (an EXIF thumbnail's) does not end the image: the GPU decoders, which
    // do not report a premature end as libjpeg does, get no file cut inside its scan data.
    if (info.header_bytes > 0 && last_end_of_image(bytes, size) < info.header_bytes)
      throw DecodeError("truncated JPEG (no end-of-image marker after the scan)");
    if (info.header_bytes > 0 && is_huffman_sequential(marker)) {
      info.first_scan_blocks = first_scan_blocks(frame, length, bytes, sos, info.header_bytes, info.width, info.height);
      info.first_scan_bytes = entropy_bytes(bytes, size, info.header_bytes);
    }
    return info;
  }
}

void check_first_scan_length(const JpegInfo& info) {
  // Scan data cut short and closed with an end-of-image marker: libjpeg warns "premature end of data" and pads,
  // nvJPEG decodes it without a word. Every Huffman-coded block takes at least two bits (its DC code and one AC
  // code, EOB at the least), so a first scan with fewer bits than twice its blocks cannot be whole.
  const auto bits = static_cast<int64_t>(info.first_scan_bytes) * 8;
  if (info.first_scan_blocks > 0 && bits < 2 * info.first_scan_blocks) {
    throw DecodeError("truncated JPEG (the first scan's " + std::to_string(info.first_scan_bytes) +
                      " bytes cannot hold its " + std::to_string(info.first_scan_blocks) + " blocks)");
  }
}

}  // namespace rn50::codecs
