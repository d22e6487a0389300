// tests/samples/test_sample_maker.cpp: tests of make_sample_dataset: layout, counts, decodable images, classes that
// differ (and can be told apart by a trivial classifier), determinism and argument checks.
#include "samples/sample_maker.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "codecs/jpeg_codec.h"
#include "core/errors.h"
#include "data/image_folder.h"
#include "tests/support/test_support.h"

namespace rn50::samples {
namespace {

using namespace rn50::data;  // the dataset that reads what the maker wrote

namespace fs = std::filesystem;
using test::TempDir;

// One split ("train" or "val") of a dataset made into `dir`.
ImageFolder split_of(const TempDir& dir, const std::string& split = "train") {
  return scan_image_folder((dir.path() / split).string());
}

SampleSpec small_spec(const std::string& out_dir) {
  SampleSpec spec;
  spec.out_dir = out_dir;
  spec.classes = 4;
  spec.per_class = 3;
  spec.val_per_class = 2;
  spec.size = 32;
  return spec;
}

std::vector<uint8_t> decode_file(const std::string& path, int& width, int& height) {
  const std::vector<uint8_t> bytes = test::read_bytes(path);
  const codecs::JpegInfo info = codecs::read_jpeg_header(bytes.data(), bytes.size());
  width = info.width;
  height = info.height;
  std::vector<uint8_t> pixels(static_cast<size_t>(width) * height * 3);
  codecs::DecodeScratch scratch;
  codecs::decode_crop_resize(bytes.data(), bytes.size(), codecs::CropRect{0, 0, width, height}, width, height, false,
                             pixels.data(), scratch);
  return pixels;
}

// Hue histogram (12 bins) of the strongly coloured pixels, normalised: a feature a trivial classifier can use.
// Backgrounds are muted (max - min channel <= ~50), so the chroma threshold keeps mostly the shape.
std::array<double, 64> colour_histogram(const std::vector<uint8_t>& pixels) {
  std::array<double, 64> histogram{};
  const size_t count = pixels.size() / 3;
  double kept = 0;
  for (size_t i = 0; i < count; ++i) {
    const double r = pixels[i * 3], g = pixels[i * 3 + 1], b = pixels[i * 3 + 2];
    const double high = std::max({r, g, b}), low = std::min({r, g, b}), chroma = high - low;
    if (chroma < 90) continue;
    double hue = high == r ? (g - b) / chroma : high == g ? 2.0 + (b - r) / chroma : 4.0 + (r - g) / chroma;
    if (hue < 0) hue += 6.0;
    histogram[static_cast<size_t>(hue * 2.0) % 12] += 1.0;
    kept += 1.0;
  }
  if (kept > 0)
    for (double& v : histogram) v /= kept;
  return histogram;
}

TEST(SampleMaker, WritesTheImageNetLayout) {
  TempDir tmp;
  EXPECT_EQ(make_sample_dataset(small_spec(tmp.str())), 4 * (3 + 2));
  const ImageFolder train = split_of(tmp);
  const ImageFolder val = split_of(tmp, "val");
  EXPECT_EQ(train.classes, val.classes);
  ASSERT_EQ(train.classes.size(), 4u);
  EXPECT_EQ(train.classes[0].rfind("n0000_circle_", 0), 0u) << train.classes[0];
  EXPECT_EQ(train.classes[1].rfind("n0001_square_", 0), 0u) << train.classes[1];
  EXPECT_EQ(train.files.size(), 12u);
  EXPECT_EQ(val.files.size(), 8u);
  EXPECT_EQ(train.files[0], (tmp.path() / "train" / train.classes[0] / (train.classes[0] + "_0.JPEG")).string());
  for (size_t i = 0; i < train.files.size(); ++i) EXPECT_EQ(train.labels[i], static_cast<int64_t>(i / 3));
  for (const std::string& path : train.files) {
    int width = 0, height = 0;
    decode_file(path, width, height);
    EXPECT_EQ(width, 43);  // 32 * 4 / 3, rounded
    EXPECT_EQ(height, 32);
  }
}

TEST(SampleMaker, ManyClassesKeepSortedOrderEqualToClassIndex) {
  TempDir tmp;
  SampleSpec spec = small_spec(tmp.str());
  spec.classes = 12;
  spec.per_class = 1;
  spec.val_per_class = 0;
  spec.size = 16;
  EXPECT_EQ(make_sample_dataset(spec), 12);
  EXPECT_FALSE(fs::exists(tmp.path() / "val"));
  const ImageFolder train = split_of(tmp);
  ASSERT_EQ(train.classes.size(), 12u);
  for (size_t c = 0; c < 12; ++c) {
    std::string prefix = "n00" + std::string(c < 10 ? "0" : "") + std::to_string(c) + "_";
    EXPECT_EQ(train.classes[c].rfind(prefix, 0), 0u) << train.classes[c];
  }
}

TEST(SampleMaker, ClassesDifferAndAreLearnable) {
  TempDir tmp;
  SampleSpec spec = small_spec(tmp.str());
  spec.classes = 10;
  spec.per_class = 12;
  spec.val_per_class = 6;
  make_sample_dataset(spec);
  const ImageFolder train = split_of(tmp);
  const ImageFolder val = split_of(tmp, "val");

  // Mean colour and mean histogram of each class.
  std::vector<std::array<double, 3>> mean_colour(10, std::array<double, 3>{});
  std::vector<std::array<double, 64>> centroid(10, std::array<double, 64>{});
  for (size_t i = 0; i < train.files.size(); ++i) {
    int width = 0, height = 0;
    const std::vector<uint8_t> pixels = decode_file(train.files[i], width, height);
    const size_t c = static_cast<size_t>(train.labels[i]);
    const size_t count = pixels.size() / 3;
    for (size_t p = 0; p < count; ++p)
      for (int ch = 0; ch < 3; ++ch) mean_colour[c][ch] += pixels[p * 3 + ch] / (count * 12.0);
    const std::array<double, 64> h = colour_histogram(pixels);
    for (size_t k = 0; k < 64; ++k) centroid[c][k] += h[k] / 12.0;
  }
  for (size_t a = 0; a < 10; ++a) {
    for (size_t b = a + 1; b < 10; ++b) {
      double distance = 0;
      for (int ch = 0; ch < 3; ++ch) distance += std::pow(mean_colour[a][ch] - mean_colour[b][ch], 2);
      EXPECT_GT(std::sqrt(distance), 3.0) << "classes " << a << " and " << b << " look alike";
    }
  }

  // Nearest histogram centroid classifies held-out images far above chance (10%).
  int correct = 0;
  for (size_t i = 0; i < val.files.size(); ++i) {
    int width = 0, height = 0;
    const std::array<double, 64> h = colour_histogram(decode_file(val.files[i], width, height));
    size_t best = 0;
    double best_distance = 1e9;
    for (size_t c = 0; c < 10; ++c) {
      double distance = 0;
      for (size_t k = 0; k < 64; ++k) distance += std::pow(h[k] - centroid[c][k], 2);
      if (distance < best_distance) {
        best_distance = distance;
        best = c;
      }
    }
    correct += static_cast<int64_t>(best) == val.labels[i];
  }
  EXPECT_GT(correct, 30) << "of 60";
}

TEST(SampleMaker, IsDeterministicForASeed) {
  TempDir a, b, c;
  SampleSpec spec = small_spec(a.str());
  make_sample_dataset(spec);
  spec.out_dir = b.str();
  make_sample_dataset(spec);
  spec.out_dir = c.str();
  spec.seed = 2;
  make_sample_dataset(spec);
  const ImageFolder first = split_of(a);
  const ImageFolder second = split_of(b);
  const ImageFolder reseeded = split_of(c);
  ASSERT_EQ(first.files.size(), second.files.size());
  for (size_t i = 0; i < first.files.size(); ++i) {
    EXPECT_EQ(test::read_bytes(first.files[i]), test::read_bytes(second.files[i]));
    EXPECT_NE(test::read_bytes(first.files[i]), test::read_bytes(reseeded.files[i]));
  }
  // Images of one class differ from each other (position, size, background, noise).
  EXPECT_NE(test::read_bytes(first.files[0]), test::read_bytes(first.files[1]));
}

// --noise sets the fine noise, and with it the file size (how hard the files are to decode): the default draws 2 to 8
// grey levels per image; 20 makes ImageNet-sized files. Only the noise changes: the draws after it are the same.
TEST(SampleMaker, NoiseMakesLargerFilesOfTheSameImages) {
  TempDir quiet, noisy;
  SampleSpec spec = small_spec(quiet.str());
  spec.size = 96;
  make_sample_dataset(spec);
  spec.out_dir = noisy.str();
  spec.noise = 20;
  make_sample_dataset(spec);
  const ImageFolder a = split_of(quiet);
  const ImageFolder b = split_of(noisy);
  ASSERT_EQ(a.files.size(), b.files.size());
  size_t quiet_bytes = 0, noisy_bytes = 0;
  for (size_t i = 0; i < a.files.size(); ++i) {
    quiet_bytes += fs::file_size(a.files[i]);
    noisy_bytes += fs::file_size(b.files[i]);
    // The same image under more noise: both use the same normal draws, scaled by 20 instead of 2 to 8, so the mean
    // absolute difference is about (20 - sigma) * sqrt(2/pi), 10 to 14 grey levels (less where clamping at 0 and
    // 255 cuts the noise), and below that to the next image.
    int w = 0, h = 0;
    const std::vector<uint8_t> p = decode_file(a.files[i], w, h), q = decode_file(b.files[i], w, h),
                               next = decode_file(b.files[(i + 1) % b.files.size()], w, h);
    ASSERT_EQ(p.size(), q.size());
    ASSERT_EQ(p.size(), next.size());
    const double diff = test::mean_abs_diff(p.data(), q.data(), p.size());
    EXPECT_GT(diff, 8.0) << a.files[i];
    EXPECT_LT(diff, 20.0) << a.files[i];
    EXPECT_LT(diff, test::mean_abs_diff(p.data(), next.data(), p.size())) << a.files[i];
  }
  EXPECT_GT(noisy_bytes, 2 * quiet_bytes) << quiet_bytes << " bytes with the default noise";
}

TEST(SampleMaker, WritesTheSameFilesWithAnyNumberOfThreads) {
  TempDir one, three;
  SampleSpec spec = small_spec(one.str());
  spec.threads = 1;
  const int64_t written = make_sample_dataset(spec);
  spec.out_dir = three.str();
  spec.threads = 3;
  EXPECT_EQ(make_sample_dataset(spec), written);
  for (const char* split : {"train", "val"}) {
    const ImageFolder a = split_of(one, split);
    const ImageFolder b = split_of(three, split);
    ASSERT_EQ(a.files.size(), b.files.size()) << split;
    for (size_t i = 0; i < a.files.size(); ++i) {
      EXPECT_EQ(a.labels[i], b.labels[i]);
      EXPECT_EQ(test::read_bytes(a.files[i]), test::read_bytes(b.files[i])) << a.files[i];
    }
  }
}

TEST(SampleMaker, RejectsNonsense) {
  TempDir tmp;
  SampleSpec spec = small_spec(tmp.str());
  spec.classes = 1;
  EXPECT_THROW(make_sample_dataset(spec), ConfigError);
  spec = small_spec(tmp.str());
  spec.per_class = 0;
  EXPECT_THROW(make_sample_dataset(spec), ConfigError);
  spec = small_spec(tmp.str());
  spec.size = 15;
  EXPECT_THROW(make_sample_dataset(spec), ConfigError);
  spec = small_spec(tmp.str());
  spec.quality = 101;
  EXPECT_THROW(make_sample_dataset(spec), ConfigError);
  spec = small_spec(tmp.str());
  spec.noise = -1;
  EXPECT_THROW(make_sample_dataset(spec), ConfigError);
  spec.noise = std::nan("");
  EXPECT_THROW(make_sample_dataset(spec), ConfigError);

  const fs::path file = tmp.path() / "a_file";
  test::write_bytes(file, {1, 2, 3});
  spec = small_spec(file.string());
  try {
    make_sample_dataset(spec);
    ADD_FAILURE() << "no error";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find(file.string()), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace rn50::samples
