// samples/sample_maker.h: `rn50 make-sample`: a small ImageNet-format JPEG dataset whose classes differ visibly.
#pragma once

#include <cstdint>
#include <string>

namespace rn50::samples {

struct SampleSpec {
  std::string out_dir;
  int classes = 10;
  int per_class = 64;      // training images per class
  int val_per_class = 16;  // validation images per class
  int size = 64;           // image side in pixels (images are size x size*4/3, landscape, like ImageNet)
  int quality = 90;
  // Fine noise's standard deviation in grey levels; 0: each image draws its own from 2 to 8 (small files,
  // about 35 KiB at size 375). Noise is what makes a JPEG large, and large files slow to decode: 20 gives
  // about 95 KiB at size 375, ImageNet's size, decoded as fast as bench-decode's generated files.
  double noise = 0;
  uint64_t seed = 1;
  int threads = 0;  // images rendered and encoded in parallel; 0: the cores this process may use
};

// What one sample may hold: ImageNet-21k has 21,841 classes, ImageNet-1k's training set 1.28 million images.
constexpr int kMaxSampleClasses = 100000;
constexpr int64_t kMaxSampleImages = 2000000;

// Writes OUT/train/<class>/*.JPEG and OUT/val/<class>/*.JPEG. Class c has its own shape, colour and
// texture; position, size, rotation, background and noise vary per image, so the task is learnable but
// not trivial. Each image comes from its own seed, so the files are the same for any number of threads.
// OUT must be new or empty. Returns the number of files written.
int64_t make_sample_dataset(const SampleSpec& spec);

}  // namespace rn50::samples
