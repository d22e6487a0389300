// tests/fuzz/fuzz_jpeg.cpp: libFuzzer target for the JPEG paths, as a training run takes them: the file read through
// JpegFolderDataset (size cap, the plain-C++ frame-header walk that also routes GPU decoding, the pixel cap,
// libjpeg-turbo's region decode, crop and resize) for a training and a validation sample, and the GPU path's
// load_encoded. Any input is decoded or refused with DecodeError; anything else is a finding.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "core/errors.h"
#include "data/dataset.h"
#include "data/image_folder.h"

namespace {

constexpr int kSide = 32;  // small outputs: the work per input is the decode, not the resize

void require(bool ok) {
  if (!ok) std::abort();
}

const std::string& sample_path() {
  static const std::string path = "/tmp/rn50_fuzz_jpeg_" + std::to_string(getpid()) + ".JPEG";
  return path;
}

rn50::data::JpegFolderDataset make_dataset(bool train) {
  rn50::data::ImageFolder folder;
  folder.classes = {"c"};
  folder.files = {sample_path()};
  folder.labels = {0};
  rn50::data::SampleTransform transform;
  transform.train = train;
  transform.image_size = kSide;
  transform.resize_size = kSide + kSide / 7;
  rn50::data::SampleLimits limits;
  limits.max_bytes = 1 << 20;
  limits.max_pixels = 1 << 22;  // 4 Mpixel: bounds one decode's memory (the default allows 179 Mpixel)
  return rn50::data::JpegFolderDataset(folder, transform, limits);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const rn50::data::JpegFolderDataset train = make_dataset(true), val = make_dataset(false);
  static rn50::data::WorkerScratch scratch;
  {
    FILE* f = std::fopen(sample_path().c_str(), "wb");
    require(f != nullptr);
    require(std::fwrite(data, 1, size, f) == size);
    std::fclose(f);
  }
  std::vector<uint8_t> out(static_cast<size_t>(kSide) * kSide * 3);
  for (const auto* dataset : {&train, &val}) {
    for (uint64_t epoch = 0; epoch < 2; ++epoch) {
      try {
        dataset->load(0, epoch, out.data(), scratch);
      } catch (const rn50::DecodeError&) {
        break;  // the same refusal every epoch
      }
    }
  }
  rn50::data::EncodedSample encoded;
  try {
    train.load_encoded(0, 0, encoded);
  } catch (const rn50::DecodeError&) {
    return 0;
  }
  // What the GPU path trusts from the walk: a size inside the limits, a component count it routes, a header that ends
  // inside the file, and a crop inside the image.
  const auto& info = encoded.info;
  require(info.width > 0 && info.height > 0 && int64_t{info.width} * info.height <= (1 << 22));
  require(info.components == 1 || info.components == 3 || info.components == 4);
  require(info.header_bytes <= encoded.bytes.size());
  const auto& r = encoded.geometry.rect;
  require(r.x >= 0 && r.y >= 0 && r.width > 0 && r.height > 0 && r.x + r.width <= info.width &&
          r.y + r.height <= info.height);
  return 0;
}
