// samples/damaged_images.h: damaged, hostile and odd JPEG files made from a good one, each with what a decoder must do
// with it: the bad-input cases of both decode paths, for tests and for `rn50 make-sample --damaged`.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace rn50::samples {

struct DamagedImage {
  std::string kind;            // names the case: the file is damaged_<kind>.JPEG
  std::vector<uint8_t> bytes;  // the file
  bool bad = true;             // a bad sample on either decode path; false: it must decode
};

// From `good`, a baseline JPEG (as encode_jpeg writes it): empty, text, a PNG signature, cut in half, scan data cut
// short before an end-of-image marker, frame headers claiming 60000x60000, 65535x65535, 20000x9000 (just above the
// default max_image_pixels) and a zero width; its picture arithmetic-coded, then cut in half and closed with an
// end-of-image marker, and with a frame header claiming 13000x13000 (below the limit); and three that must decode:
// bytes after the end-of-image marker, stray bytes between header segments, and the arithmetic-coded picture whole.
// (The trailer is 4 KiB, as some cameras append.)
std::vector<DamagedImage> damaged_images(const std::vector<uint8_t>& good);

struct DamagedCounts {
  int files = 0;  // entries written (files, links, FIFOs)
  int bad = 0;    // of which bad samples
};

// Writes damaged_images(good) into `dir` as damaged_<kind>.JPEG and, where `special`, entries that are bad samples
// without being read: a FIFO, a link to itself, a link to nothing and a sparse 2 GiB file (above max_image_bytes).
// Throws std::runtime_error naming the path when one cannot be made.
DamagedCounts write_damaged_images(const std::string& dir, const std::vector<uint8_t>& good, bool special);

}  // namespace rn50::samples
