// data/dataset.h: the interface every image source implements, the JPEG folder source, and the epoch order.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "codecs/jpeg_codec.h"
#include "core/image_limits.h"
#include "data/decode_budget.h"
#include "data/image_folder.h"
#include "data/transforms.h"

namespace rn50::data {

// How a sample becomes a training or validation image.
struct SampleTransform {
  bool train = true;      // RandomResizedCrop + random flip; otherwise resize + centre crop
  int image_size = 224;   // output side
  int resize_size = 256;  // validation: shorter side before the centre crop
  RandomResizedCropSpec crop;
  bool random_flip = true;
  uint64_t seed = 0;
};

// Bounds on one image, checked before its bytes are read and before it is decoded: a file over them is a bad sample.
struct SampleLimits {
  int64_t max_bytes = kDefaultMaxImageBytes;    // larger files are never read
  int64_t max_pixels = kDefaultMaxImagePixels;  // width x height above this is refused before decoding
};

// Reads a whole file into `bytes`, reusing its capacity: only a regular file of at most max_bytes (core/files.h);
// throws DecodeError naming the file otherwise.
void read_file(const std::string& path, std::vector<uint8_t>& bytes, int64_t max_bytes);
// The header's size against max_pixels, before any decoding allocates for it; throws DecodeError.
void check_pixels(const codecs::JpegInfo& info, int64_t max_pixels);

// The crop and flip of one sample. Both decode paths take them from here, so that they agree for every sample.
struct SampleGeometry {
  codecs::CropRect rect;
  bool flip = false;
};

// Training: RandomResizedCrop then the flip, both drawn from sample_rng(seed, epoch, index); validation: the
// centre crop after the resize, never flipped.
SampleGeometry sample_geometry(const SampleTransform& transform, int width, int height, uint64_t epoch, size_t index);

// The label of a batch position left empty because its sample could not be used (validation, which skips bad samples
// rather than replacing them: LoaderOptions::replace_bad). PyTorch's cross_entropy ignores it by default.
inline constexpr int64_t kSkippedLabel = -100;

// A sample left compressed for the GPU to decode: the file's bytes, its frame header and its crop and flip.
struct EncodedSample {
  std::vector<uint8_t> bytes;  // the whole file; the capacity stays from batch to batch
  codecs::JpegInfo info;
  SampleGeometry geometry;
  size_t index = 0;  // dataset index: names the file when the device cannot decode it
  // The loader's threads decoded it already (decode: gpu with a CPU share, data/loader.h): its finished image is in
  // the batch's pixel buffer at its position, and the device only normalises it.
  bool predecoded = false;
  // The loader could not read it, reported it and labelled it kSkippedLabel: there is nothing to decode.
  bool skipped = false;
};

// Per-thread state of a loader worker: reused buffers, so that the steady state allocates nothing.
struct WorkerScratch {
  std::vector<uint8_t> file;  // compressed bytes of the current file
  codecs::DecodeScratch decode;
  DecodeBudget* budget = nullptr;  // decoded bytes in flight, shared by the threads (null: unbounded)
};

class ImageDataset {
 public:
  virtual ~ImageDataset() = default;
  virtual size_t size() const = 0;
  virtual int64_t label(size_t index) const = 0;
  virtual std::string describe(size_t index) const = 0;  // what to print when the sample is bad (its path)
  // Writes sample `index`, transformed for `epoch`, as image_size x image_size x 3 RGB bytes (HWC) at `out`,
  // holding its decoded bytes of scratch.budget while it decodes. Throws rn50::DecodeError when the sample cannot be
  // used.
  virtual void load(size_t index, uint64_t epoch, uint8_t* out, WorkerScratch& scratch) const = 0;
  // Reads sample `index` without decoding it, with the crop and flip of `epoch` (GPU decoding), holding `budget`'s
  // bytes for what it checks by decoding (an arithmetic-coded file's scans; null: unbounded). Throws
  // rn50::DecodeError when the file cannot be read or its header is not a usable JPEG's. Sources that only
  // hand out pixels keep this default, which throws std::logic_error.
  virtual void load_encoded(size_t index, uint64_t epoch, EncodedSample& out, DecodeBudget* budget = nullptr) const;
  // Decodes a sample load_encoded read into the image load() would have written (the same crop and flip) at `out`,
  // holding its decoded bytes of scratch.budget while it decodes. Throws rn50::DecodeError when libjpeg cannot
  // decode it; the default throws std::logic_error, as load_encoded's does.
  virtual void decode_encoded(const EncodedSample& sample, uint8_t* out, WorkerScratch& scratch) const;
};

class JpegFolderDataset final : public ImageDataset {
 public:
  JpegFolderDataset(ImageFolder folder, SampleTransform transform, SampleLimits limits = {});
  size_t size() const override { return folder_.files.size(); }
  int64_t label(size_t index) const override { return folder_.labels[index]; }
  std::string describe(size_t index) const override { return folder_.files[index]; }
  void load(size_t index, uint64_t epoch, uint8_t* out, WorkerScratch& scratch) const override;
  void load_encoded(size_t index, uint64_t epoch, EncodedSample& out, DecodeBudget* budget = nullptr) const override;
  void decode_encoded(const EncodedSample& sample, uint8_t* out, WorkerScratch& scratch) const override;
  const std::vector<std::string>& classes() const { return folder_.classes; }
  const SampleTransform& transform() const { return transform_; }

 private:
  // Decodes a checked header's sample into the finished image, within the budget; check_scans: an arithmetic-coded
  // file's scans first (load_encoded checked them already).
  void decode_checked(const uint8_t* bytes, size_t size, const codecs::JpegInfo& info, const SampleGeometry& geometry,
                      uint8_t* out, WorkerScratch& scratch, bool check_scans) const;

  ImageFolder folder_;
  SampleTransform transform_;
  SampleLimits limits_;
};

// The sample order of one epoch: a permutation of [0, n) drawn from (seed, epoch) when `shuffle`, the
// identity otherwise; every rank draws the same one and keeps positions rank, rank + world, ..., cut to
// n / world entries so that all ranks take the same number of steps.
std::vector<size_t> epoch_order(size_t n, uint64_t seed, uint64_t epoch, bool shuffle, int rank = 0, int world = 1);

}  // namespace rn50::data
