// codecs/jpeg_header.h: a JPEG's frame header (size, components, progressive) read by walking its markers in plain
// C++, without libjpeg: all that the loader threads of the GPU decode path need before the device decodes.
#pragma once

#include <cstddef>
#include <cstdint>

#include "codecs/jpeg_codec.h"

namespace rn50::codecs {

// Reads the first start-of-frame (SOFn) segment, and where the first scan's header ends (header_bytes). Throws
// rn50::DecodeError for what the CPU decoder also rejects before decoding (empty, PNG, GIF, no start-of-image
// marker, no end-of-image marker: check_jpeg_container), for data that ends or breaks inside a segment before the
// frame header, for a scan or end-of-image before it, for a zero width, for a height left to a later DNL marker,
// and for component counts other than 1, 3 or 4. Stray bytes between segments are skipped, as libjpeg skips them.
// It also counts the first scan's blocks and entropy-coded bytes (JpegInfo::first_scan_*), for the check below.
JpegInfo parse_jpeg_frame_header(const uint8_t* bytes, size_t size);

// Throws rn50::DecodeError when a Huffman-coded sequential first scan has fewer bits than two per block: data cut
// short, which nvJPEG would decode without an error. Callers check the pixel limit first (a frame header claiming
// billions of pixels is a decompression bomb before it is a short scan). Arithmetic-coded files have no such bound
// (a flat 13000x13000 image codes in a few hundred bytes): codecs::check_arithmetic_scans decodes them instead.
void check_first_scan_length(const JpegInfo& info);

}  // namespace rn50::codecs
