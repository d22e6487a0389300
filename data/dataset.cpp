// data/dataset.cpp: JpegFolderDataset (read, crop, decode one sample) and epoch_order (the portable shuffle).
#include "data/dataset.h"

#include <cstdio>
#include <memory>
#include <numeric>
#include <stdexcept>
#include <string>
#include <utility>

#include "codecs/jpeg_header.h"
#include "core/errors.h"
#include "core/files.h"
#include "data/random_draws.h"

namespace rn50::data {

void read_file(const std::string& path, std::vector<uint8_t>& bytes, int64_t max_bytes) {
  try {
    files::read_whole(path, static_cast<uint64_t>(max_bytes), bytes);
  } catch (const files::ReadError& e) {
    if (e.kind != files::ReadError::Kind::kTooLarge) throw DecodeError(e.what());
    throw DecodeError(path + ": " + std::to_string(e.size) + " bytes, above max_image_bytes (" +
                      std::to_string(max_bytes) + ")");
  }
}

void check_pixels(const codecs::JpegInfo& info, int64_t max_pixels) {
  const int64_t pixels = static_cast<int64_t>(info.width) * info.height;
  if (pixels > max_pixels) {
    throw DecodeError(std::to_string(info.width) + "x" + std::to_string(info.height) + " is " + std::to_string(pixels) +
                      " pixels, above max_image_pixels (" + std::to_string(max_pixels) + ")");
  }
}

namespace {

// Buffers above this go back after their image, while the budget still counts them: a thread keeps what ordinary
// images need (a 2000x1500 region and more), not the largest region it ever decoded.
constexpr size_t kKeptScratchBytes = size_t{16} << 20;

// Gives the decode buffers above kKeptScratchBytes back when it goes out of scope, the image decoded or refused.
struct TrimOnExit {
  codecs::DecodeScratch& scratch;
  ~TrimOnExit() {
    if (scratch.rows.capacity() > kKeptScratchBytes) std::vector<uint8_t>().swap(scratch.rows);
    if (scratch.region.capacity() > kKeptScratchBytes) std::vector<uint8_t>().swap(scratch.region);
  }
};

}  // namespace

SampleGeometry sample_geometry(const SampleTransform& transform, int width, int height, uint64_t epoch, size_t index) {
  SampleGeometry geometry;
  if (transform.train) {
    std::mt19937_64 rng = sample_rng(transform.seed, epoch, index);
    geometry.rect = random_resized_crop(width, height, transform.crop, rng);
    geometry.flip = transform.random_flip && detail::uniform_unit(rng) < 0.5;  // drawn after the crop, as torchvision
  } else {
    geometry.rect = center_crop_after_resize(width, height, transform.resize_size, transform.image_size);
  }
  return geometry;
}

void ImageDataset::load_encoded(size_t, uint64_t, EncodedSample&, DecodeBudget*) const {
  throw std::logic_error("this image source hands out decoded pixels only");
}

void ImageDataset::decode_encoded(const EncodedSample&, uint8_t*, WorkerScratch&) const {
  throw std::logic_error("this image source hands out decoded pixels only");
}

JpegFolderDataset::JpegFolderDataset(ImageFolder folder, SampleTransform transform, SampleLimits limits)
    : folder_(std::move(folder)), transform_(transform), limits_(limits) {
  if (folder_.labels.size() != folder_.files.size())
    throw DataError("image folder has " + std::to_string(folder_.files.size()) + " files but " +
                    std::to_string(folder_.labels.size()) + " labels");
  if (transform_.image_size <= 0)
    throw ConfigError("image size must be positive (got " + std::to_string(transform_.image_size) + ")");
  if (!transform_.train && transform_.resize_size < transform_.image_size)
    throw ConfigError("validation resize size " + std::to_string(transform_.resize_size) +
                      " is smaller than the image size " + std::to_string(transform_.image_size));
}

void JpegFolderDataset::load(size_t index, uint64_t epoch, uint8_t* out, WorkerScratch& scratch) const {
  const std::string& path = folder_.files.at(index);
  read_file(path, scratch.file, limits_.max_bytes);
  try {
    // The plain marker walk: libjpeg reads the header again inside decode_crop_resize, one decompressor per image.
    const codecs::JpegInfo info = codecs::parse_jpeg_frame_header(scratch.file.data(), scratch.file.size());
    check_pixels(info, limits_.max_pixels);
    codecs::check_first_scan_length(info);  // as the GPU path checks it: both count such a file
    const SampleGeometry geometry = sample_geometry(transform_, info.width, info.height, epoch, index);
    decode_checked(scratch.file.data(), scratch.file.size(), info, geometry, out, scratch, /*check_scans=*/true);
  } catch (const DecodeError& e) {
    throw DecodeError(path + ": " + e.what());
  }
}

void JpegFolderDataset::decode_checked(const uint8_t* bytes, size_t size, const codecs::JpegInfo& info,
                                       const SampleGeometry& geometry, uint8_t* out, WorkerScratch& scratch,
                                       bool check_scans) const {
  const DecodeBudget::Hold hold = scratch.budget
                                      ? scratch.budget->acquire(codecs::decode_memory_bytes(
                                            info, geometry.rect, transform_.image_size, transform_.image_size))
                                      : DecodeBudget::Hold();
  const TrimOnExit trim{scratch.decode};  // before the hold ends
  // The whole scan, not only the crop's rows: both paths count the same files, whatever the crop.
  if (check_scans && info.arithmetic) codecs::check_arithmetic_scans(bytes, size);
  codecs::decode_crop_resize(bytes, size, geometry.rect, transform_.image_size, transform_.image_size, geometry.flip,
                             out, scratch.decode);
}

void JpegFolderDataset::decode_encoded(const EncodedSample& sample, uint8_t* out, WorkerScratch& scratch) const {
  // load_encoded checked the size, the first scan and an arithmetic file's scans already.
  try {
    decode_checked(sample.bytes.data(), sample.bytes.size(), sample.info, sample.geometry, out, scratch,
                   /*check_scans=*/false);
  } catch (const DecodeError& e) {
    throw DecodeError(folder_.files.at(sample.index) + ": " + e.what());
  }
}

void JpegFolderDataset::load_encoded(size_t index, uint64_t epoch, EncodedSample& out, DecodeBudget* budget) const {
  const std::string& path = folder_.files.at(index);
  read_file(path, out.bytes, limits_.max_bytes);
  try {
    out.info = codecs::parse_jpeg_frame_header(out.bytes.data(), out.bytes.size());
    check_pixels(out.info, limits_.max_pixels);
    codecs::check_first_scan_length(out.info);  // nvJPEG decodes scan data cut short without an error
    // nvJPEG decodes no arithmetic coding (the GPU path hands it to libjpeg), and libjpeg's arithmetic decoder says
    // nothing of data that ends early: checked here, on the loader's thread, as the CPU path checks it. The check
    // decodes at 1/8 scale, and a multi-scan file's coefficients of the whole image with it: within the budget, as
    // the CPU path's decode is (sixteen loader threads would otherwise hold 1 GB each for 13000x13000 files).
    if (out.info.arithmetic) {
      const codecs::CropRect whole{0, 0, out.info.width, out.info.height};
      const DecodeBudget::Hold hold = budget
                                          ? budget->acquire(codecs::decode_memory_bytes(
                                                out.info, whole, (out.info.width + 7) / 8, (out.info.height + 7) / 8))
                                          : DecodeBudget::Hold();
      codecs::check_arithmetic_scans(out.bytes.data(), out.bytes.size());
    }
    out.geometry = sample_geometry(transform_, out.info.width, out.info.height, epoch, index);
    out.index = index;
  } catch (const DecodeError& e) {
    throw DecodeError(path + ": " + e.what());
  }
}

std::vector<size_t> epoch_order(size_t n, uint64_t seed, uint64_t epoch, bool shuffle, int rank, int world) {
  if (world < 1) throw ConfigError("world size must be at least 1 (got " + std::to_string(world) + ")");
  if (rank < 0 || rank >= world)
    throw ConfigError("rank " + std::to_string(rank) + " is outside the world of " + std::to_string(world));
  std::vector<size_t> permutation(n);
  std::iota(permutation.begin(), permutation.end(), size_t{0});
  if (shuffle && n > 1) {
    // Fisher-Yates with our own bounded draw: the same permutation with every standard library.
    std::mt19937_64 rng(detail::mix_seed({0x6f72646572ULL /* "order" */, seed, epoch}));
    for (size_t i = n - 1; i > 0; --i) {
      const size_t j = static_cast<size_t>(detail::uniform_below(rng, static_cast<uint64_t>(i) + 1));
      std::swap(permutation[i], permutation[j]);
    }
  }
  const size_t per_rank = n / static_cast<size_t>(world);
  std::vector<size_t> mine;
  mine.reserve(per_rank);
  for (size_t k = 0; k < per_rank; ++k) mine.push_back(permutation[static_cast<size_t>(rank) + k * world]);
  return mine;
}

}  // namespace rn50::data
