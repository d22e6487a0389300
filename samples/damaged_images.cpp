// samples/damaged_images.cpp: the damaged-file generator: byte surgery on a good baseline JPEG, and special files.
#include "samples/damaged_images.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <stdexcept>

#include "codecs/jpeg_codec.h"

namespace rn50::samples {

namespace {

// Where the segment with `marker` (SOF0 0xC0, SOS 0xDA) starts, walking the header's segments; size() if absent.
size_t segment_offset(const std::vector<uint8_t>& jpeg, uint8_t marker) {
  size_t pos = 2;
  while (pos + 4 <= jpeg.size() && jpeg[pos] == 0xFF && jpeg[pos + 1] != marker) {
    pos += 2 + ((static_cast<size_t>(jpeg[pos + 2]) << 8) | jpeg[pos + 3]);
  }
  return pos + 4 <= jpeg.size() && jpeg[pos + 1] == marker ? pos : jpeg.size();
}

// `jpeg` with the frame header (SOF0, or `frame_marker`) claiming width x height.
std::vector<uint8_t> with_frame_size(std::vector<uint8_t> jpeg, int width, int height, uint8_t frame_marker = 0xC0) {
  const size_t sof = segment_offset(jpeg, frame_marker);
  if (sof + 9 > jpeg.size()) throw std::invalid_argument("damaged_images: the good file has no such frame header");
  jpeg[sof + 5] = static_cast<uint8_t>(height >> 8);
  jpeg[sof + 6] = static_cast<uint8_t>(height & 0xFF);
  jpeg[sof + 7] = static_cast<uint8_t>(width >> 8);
  jpeg[sof + 8] = static_cast<uint8_t>(width & 0xFF);
  return jpeg;
}

// `good`'s picture arithmetic-coded (SOF9), scaled up to at least 128 rows so that half of the file is several rows
// of blocks.
std::vector<uint8_t> arithmetic_coded(const std::vector<uint8_t>& good) {
  const codecs::JpegInfo info = codecs::read_jpeg_header(good.data(), good.size());
  const int scale = std::max(1, (128 + info.height - 1) / info.height);
  const int width = info.width * scale, height = info.height * scale;
  std::vector<uint8_t> pixels(static_cast<size_t>(width) * height * 3);
  codecs::DecodeScratch scratch;
  codecs::decode_crop_resize(good.data(), good.size(), {0, 0, info.width, info.height}, width, height, false,
                             pixels.data(), scratch);
  return codecs::encode_jpeg(pixels.data(), width, height, 3, 90, /*progressive=*/false, /*arithmetic=*/true);
}

void write_file(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  if (!out) throw std::runtime_error("cannot write " + path);
}

void check(bool ok, const std::string& what) {
  if (!ok) throw std::runtime_error(what + ": " + std::strerror(errno));
}

}  // namespace

std::vector<DamagedImage> damaged_images(const std::vector<uint8_t>& good) {
  const size_t sos = segment_offset(good, 0xDA);
  if (sos >= good.size()) throw std::invalid_argument("damaged_images: the good file has no scan");
  std::vector<DamagedImage> out;
  out.push_back({"empty", {}, true});
  const std::string text = "this is not an image\n";
  out.push_back({"text", std::vector<uint8_t>(text.begin(), text.end()), true});
  out.push_back({"png_signature", {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n', 0, 0, 0, 13}, true});
  out.push_back({"truncated",
                 std::vector<uint8_t>(good.begin(), good.begin() + static_cast<std::ptrdiff_t>(good.size() / 2)),
                 true});
  std::vector<uint8_t> short_scan(good.begin(),
                                  good.begin() + static_cast<std::ptrdiff_t>(std::min(good.size() - 2, sos + 40)));
  short_scan.push_back(0xFF);
  short_scan.push_back(0xD9);
  out.push_back({"short_scan", short_scan, true});
  out.push_back({"claims_60000x60000", with_frame_size(good, 60000, 60000), true});
  out.push_back({"claims_65535x65535", with_frame_size(good, 65535, 65535), true});
  out.push_back({"claims_20000x9000", with_frame_size(good, 20000, 9000), true});  // 180 Mpixel: just above the limit
  out.push_back({"zero_width", with_frame_size(good, 0, 64), true});
  std::vector<uint8_t> trailing = good;
  for (int i = 0; i < 4096; ++i) trailing.push_back(static_cast<uint8_t>(i * 37));  // a camera trailer; no FF D9
  out.push_back({"trailing_bytes", trailing, false});
  std::vector<uint8_t> stray = good;  // fill bytes before the scan's marker, which libjpeg skips
  stray.insert(stray.begin() + static_cast<std::ptrdiff_t>(sos), {0xFF, 0xFF, 0xFF});
  out.push_back({"fill_bytes_before_scan", stray, false});
  // Arithmetic coding: libjpeg's decoder reads on from zeros after a marker without a warning (a file cut short and
  // closed again decodes), and a few bytes can hold any number of blocks (no bound like Huffman's two bits a block).
  const std::vector<uint8_t> arithmetic = arithmetic_coded(good);
  out.push_back({"arithmetic_coded", arithmetic, false});
  std::vector<uint8_t> half(arithmetic.begin(),
                            arithmetic.begin() + static_cast<std::ptrdiff_t>(arithmetic.size() / 2));
  half.push_back(0xFF);
  half.push_back(0xD9);
  out.push_back({"arithmetic_cut_in_half", half, true});
  // Below max_image_pixels, and the data of a small picture: it ends in the first row of blocks.
  out.push_back({"arithmetic_claims_13000x13000", with_frame_size(arithmetic, 13000, 13000, 0xC9), true});
  return out;
}

DamagedCounts write_damaged_images(const std::string& dir, const std::vector<uint8_t>& good, bool special) {
  DamagedCounts counts;
  for (const DamagedImage& d : damaged_images(good)) {
    write_file(dir + "/damaged_" + d.kind + ".JPEG", d.bytes);
    ++counts.files;
    counts.bad += d.bad ? 1 : 0;
  }
  if (!special) return counts;
  const std::string fifo = dir + "/damaged_fifo.JPEG", loop = dir + "/damaged_link_loop.JPEG",
                    dangling = dir + "/damaged_link_dangling.JPEG", sparse = dir + "/damaged_sparse_2gib.JPEG";
  for (const std::string& p : {fifo, loop, dangling, sparse}) ::unlink(p.c_str());
  check(::mkfifo(fifo.c_str(), 0600) == 0, "mkfifo " + fifo);
  check(::symlink("damaged_link_loop.JPEG", loop.c_str()) == 0, "symlink " + loop);
  check(::symlink("damaged_no_such_file.JPEG", dangling.c_str()) == 0, "symlink " + dangling);
  write_file(sparse, good);
  check(::truncate(sparse.c_str(), off_t{2} << 30) == 0, "truncate " + sparse);
  counts.files += 4;
  counts.bad += 4;
  return counts;
}

}  // namespace rn50::samples
