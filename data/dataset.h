// data/dataset.h: the interface every image source implements, the JPEG folder source, and the epoch order.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "data/image_folder.h"
#include "data/jpeg_codec.h"
#include "data/transforms.h"

namespace rn50::data {

// How a sample becomes a training or validation image.
struct SampleTransform {
  bool train = true;          // RandomResizedCrop + random flip; otherwise resize + centre crop
  int image_size = 224;       // output side
  int resize_size = 256;      // validation: shorter side before the centre crop
  RandomResizedCropSpec crop;
  bool random_flip = true;
  uint64_t seed = 0;
};

// Per-thread state of a loader worker: reused buffers, so that the steady state allocates nothing.
struct WorkerScratch {
  std::vector<uint8_t> file;  // compressed bytes of the current file
  DecodeScratch decode;
};

class ImageDataset {
 public:
  virtual ~ImageDataset() = default;
  virtual size_t size() const = 0;
  virtual int64_t label(size_t index) const = 0;
  virtual std::string describe(size_t index) const = 0;  // what to print when the sample is bad (its path)
  // Writes sample `index`, transformed for `epoch`, as image_size x image_size x 3 RGB bytes (HWC) at `out`.
  // Throws rn50::DecodeError when the sample cannot be used.
  virtual void load(size_t index, uint64_t epoch, uint8_t* out, WorkerScratch& scratch) const = 0;
};

class JpegFolderDataset final : public ImageDataset {
 public:
  JpegFolderDataset(ImageFolder folder, SampleTransform transform);
  size_t size() const override { return folder_.files.size(); }
  int64_t label(size_t index) const override { return folder_.labels[index]; }
  std::string describe(size_t index) const override { return folder_.files[index]; }
  void load(size_t index, uint64_t epoch, uint8_t* out, WorkerScratch& scratch) const override;
  const std::vector<std::string>& classes() const { return folder_.classes; }
  const SampleTransform& transform() const { return transform_; }

 private:
  ImageFolder folder_;
  SampleTransform transform_;
};

// The sample order of one epoch: a permutation of [0, n) drawn from (seed, epoch) when `shuffle`, the
// identity otherwise; every rank draws the same one and keeps positions rank, rank + world, ..., cut to
// n / world entries so that all ranks take the same number of steps.
std::vector<size_t> epoch_order(size_t n, uint64_t seed, uint64_t epoch, bool shuffle, int rank = 0, int world = 1);

}  // namespace rn50::data
