// tests/data/test_dataset.cpp: tests of JpegFolderDataset (deterministic train and val samples, error messages)
// and of epoch_order.
#include "data/dataset.h"

#include <algorithm>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/errors.h"
#include "data/random_draws.h"
#include "tests/support/error_of.h"
#include "tests/support/special_jpegs.h"
#include "tests/support/test_support.h"

namespace rn50::data {
namespace {

namespace fs = std::filesystem;
using test::TempDir;

// ROOT/train/<class>/*.JPEG with images of assorted shapes, one of them grayscale.
class DatasetTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = tmp_.path() / "train";
    const int sizes[][2] = {{120, 90}, {90, 120}, {64, 64}, {200, 150}};
    int k = 0;
    for (const char* cls : {"n01", "n02", "n03"}) {
      for (int i = 0; i < 4; ++i, ++k) {
        const int w = sizes[i][0], h = sizes[i][1];
        std::vector<uint8_t> jpeg;
        if (k == 5) {
          std::vector<uint8_t> gray(static_cast<size_t>(w) * h);
          for (size_t p = 0; p < gray.size(); ++p) gray[p] = static_cast<uint8_t>(p * 7 % 251);
          jpeg = codecs::encode_jpeg(gray.data(), w, h, 1, 90);
        } else {
          const std::vector<uint8_t> pixels = test::smooth_image(w, h, 0.4 * k);
          jpeg = codecs::encode_jpeg(pixels.data(), w, h, 3, 90);
        }
        test::write_bytes(root_ / cls / ("img" + std::to_string(i) + ".JPEG"), jpeg);
      }
    }
  }

  SampleTransform train_transform() const {
    SampleTransform t;
    t.train = true;
    t.image_size = 32;
    t.seed = 17;
    return t;
  }
  SampleTransform val_transform() const {
    SampleTransform t;
    t.train = false;
    t.image_size = 32;
    t.resize_size = 40;
    return t;
  }

  static std::vector<uint8_t> load(const ImageDataset& dataset, size_t index, uint64_t epoch) {
    std::vector<uint8_t> out(32 * 32 * 3);
    WorkerScratch scratch;
    dataset.load(index, epoch, out.data(), scratch);
    return out;
  }

  // The message of reading sample `index` for the GPU ("" when it reads).
  static std::string encoded_error_of(const ImageDataset& dataset, size_t index, EncodedSample& out) {
    return rn50::testing::error_of<DecodeError>([&] { dataset.load_encoded(index, 0, out); });
  }

  static std::string decode_error_of(const ImageDataset& dataset, size_t index) {
    return rn50::testing::error_of<DecodeError>([&] { load(dataset, index, 0); });
  }

  TempDir tmp_;
  fs::path root_;
};

TEST_F(DatasetTest, LabelsDescribeAndClasses) {
  const JpegFolderDataset dataset(scan_image_folder(root_.string()), train_transform());
  ASSERT_EQ(dataset.size(), 12u);
  EXPECT_EQ(dataset.classes(), (std::vector<std::string>{"n01", "n02", "n03"}));
  EXPECT_EQ(dataset.label(0), 0);
  EXPECT_EQ(dataset.label(5), 1);
  EXPECT_EQ(dataset.label(11), 2);
  EXPECT_EQ(dataset.describe(6), (root_ / "n02" / "img2.JPEG").string());
}

TEST_F(DatasetTest, TrainSamplesDependOnIndexAndEpochOnly) {
  const JpegFolderDataset dataset(scan_image_folder(root_.string()), train_transform());
  WorkerScratch shared;  // a scratch used for other images first must not change the result
  for (size_t i = 0; i < dataset.size(); ++i) {
    const std::vector<uint8_t> first = load(dataset, i, 0);
    std::vector<uint8_t> again(first.size());
    dataset.load((i + 3) % dataset.size(), 4, again.data(), shared);
    dataset.load(i, 0, again.data(), shared);
    EXPECT_EQ(first, again) << "sample " << i;
    EXPECT_NE(first, load(dataset, i, 1)) << "sample " << i << ": epoch 1 should crop differently";
  }
  SampleTransform other_seed = train_transform();
  other_seed.seed = 18;
  const JpegFolderDataset reseeded(scan_image_folder(root_.string()), other_seed);
  EXPECT_NE(load(dataset, 2, 0), load(reseeded, 2, 0));
}

TEST_F(DatasetTest, TrainSampleIsTheSpecifiedCropThenFlip) {
  const SampleTransform transform = train_transform();
  const JpegFolderDataset dataset(scan_image_folder(root_.string()), transform);
  int flips = 0;
  for (size_t i = 0; i < dataset.size(); ++i) {
    for (uint64_t epoch = 0; epoch < 3; ++epoch) {
      const std::vector<uint8_t> bytes = test::read_bytes(dataset.describe(i));
      const codecs::JpegInfo info = codecs::read_jpeg_header(bytes.data(), bytes.size());
      std::mt19937_64 rng = sample_rng(transform.seed, epoch, i);
      const codecs::CropRect rect = random_resized_crop(info.width, info.height, transform.crop, rng);
      const bool flip = detail::uniform_unit(rng) < 0.5;  // the flip is drawn after the crop
      flips += flip;
      std::vector<uint8_t> expected(32 * 32 * 3);
      codecs::DecodeScratch scratch;
      codecs::decode_crop_resize(bytes.data(), bytes.size(), rect, 32, 32, flip, expected.data(), scratch);
      EXPECT_EQ(load(dataset, i, epoch), expected);
    }
  }
  EXPECT_GT(flips, 5);
  EXPECT_LT(flips, 31);
}

TEST_F(DatasetTest, ValidationIsTheCentreCropInEveryEpoch) {
  const SampleTransform transform = val_transform();
  const JpegFolderDataset dataset(scan_image_folder(root_.string()), transform);
  for (size_t i = 0; i < dataset.size(); ++i) {
    const std::vector<uint8_t> bytes = test::read_bytes(dataset.describe(i));
    const codecs::JpegInfo info = codecs::read_jpeg_header(bytes.data(), bytes.size());
    const codecs::CropRect rect = center_crop_after_resize(info.width, info.height, 40, 32);
    std::vector<uint8_t> expected(32 * 32 * 3);
    codecs::DecodeScratch scratch;
    codecs::decode_crop_resize(bytes.data(), bytes.size(), rect, 32, 32, false, expected.data(), scratch);
    const std::vector<uint8_t> epoch0 = load(dataset, i, 0);
    EXPECT_EQ(epoch0, expected);
    EXPECT_EQ(epoch0, load(dataset, i, 7));
  }
}

// Every way a file can be bad fails with its path and reason, whether the sample is decoded or read for the GPU.
TEST_F(DatasetTest, BadFilesThrowDecodeErrorNamingThePath) {
  const ImageFolder folder = scan_image_folder(root_.string());
  const JpegFolderDataset dataset(folder, train_transform());
  const std::vector<uint8_t> good = test::read_bytes(folder.files[1]);
  fs::remove(folder.files[0]);
  test::write_bytes(folder.files[1], {});
  test::write_bytes(folder.files[2], std::vector<uint8_t>(good.begin(), good.begin() + good.size() / 2));
  test::write_bytes(folder.files[3], {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n', 0, 0, 0, 0});
  fs::remove(folder.files[4]);
  fs::create_directory(folder.files[4]);

  const std::string reasons[] = {"No such file or directory", "empty file", "truncated", "PNG", "not a regular file"};
  EncodedSample encoded;
  for (size_t i = 0; i < 5; ++i) {
    const std::string message = decode_error_of(dataset, i);
    EXPECT_NE(message.find(folder.files[i]), std::string::npos) << message;
    EXPECT_NE(message.find(reasons[i]), std::string::npos) << message;
    // Reading a sample for the GPU fails the same way, before any decoding.
    EXPECT_EQ(encoded_error_of(dataset, i, encoded), message);
  }
  EXPECT_EQ(decode_error_of(dataset, 5), "");
  EXPECT_NO_THROW(dataset.load_encoded(5, 0, encoded));
}

// Hostile files: each a bad sample with its reason, in bounded time and memory, on both paths; the
// limits are the dataset's (config keys max_image_bytes and max_image_pixels).
TEST_F(DatasetTest, HostileFilesAreBadSamplesBeforeTheyCostTimeOrMemory) {
  const ImageFolder folder = scan_image_folder(root_.string());
  SampleLimits limits;
  limits.max_bytes = 1 << 20;
  const JpegFolderDataset dataset(folder, train_transform(), limits);
  const std::vector<uint8_t> good = test::read_bytes(folder.files[1]);
  // A FIFO: opening it would wait for a writer forever.
  fs::remove(folder.files[0]);
  ASSERT_EQ(::mkfifo(folder.files[0].c_str(), 0600), 0);
  // A sparse file far larger than the limit: refused from its size, never read.
  test::write_bytes(folder.files[1], good);
  ASSERT_EQ(::truncate(folder.files[1].c_str(), off_t{2} << 30), 0);
  // A 2 KB file whose frame header claims 60000x60000 pixels.
  std::vector<uint8_t> bomb = good;
  const size_t sof = test::segment_offset(bomb, 0xC0);
  for (const size_t at : {sof + 5, sof + 7}) bomb[at] = 0xEA, bomb[at + 1] = 0x60;  // 60000, big-endian
  test::write_bytes(folder.files[2], bomb);
  // Scan data cut short before an end-of-image marker: libjpeg would pad the image with grey, nvJPEG says nothing.
  const size_t sos = test::segment_offset(good, 0xDA);
  std::vector<uint8_t> damaged(good.begin(), good.begin() + static_cast<std::ptrdiff_t>(sos + 40));
  damaged.push_back(0xFF);
  damaged.push_back(0xD9);
  test::write_bytes(folder.files[3], damaged);

  const std::string reasons[] = {"not a regular file", "above max_image_bytes (1048576)",
                                 "60000x60000 is 3600000000 pixels, above max_image_pixels (178956970)",
                                 "truncated JPEG (the first scan's 26 bytes cannot hold its"};
  EncodedSample encoded;
  for (size_t i = 0; i < 4; ++i) {
    const std::string message = decode_error_of(dataset, i);
    EXPECT_NE(message.find(reasons[i]), std::string::npos) << message;
    EXPECT_EQ(encoded_error_of(dataset, i, encoded), message);  // the GPU path's host side: the same reason
  }
  // Cut after more than two bits a block (here halfway through the scan): only decoding finds it, libjpeg's warning
  // on the CPU path; the GPU path's host side takes it (nvJPEG decodes it as it is).
  std::vector<uint8_t> half(good.begin(), good.begin() + static_cast<std::ptrdiff_t>(sos + (good.size() - sos) / 2));
  half.push_back(0xFF);
  half.push_back(0xD9);
  test::write_bytes(folder.files[3], half);
  EXPECT_NE(decode_error_of(dataset, 3).find("damaged JPEG data"), std::string::npos) << decode_error_of(dataset, 3);
  EXPECT_NO_THROW(dataset.load_encoded(3, 0, encoded));
  // A good file with bytes after its end-of-image marker decodes, as libjpeg takes it.
  std::vector<uint8_t> trailing = good;
  for (int i = 0; i < 16; ++i) trailing.push_back(static_cast<uint8_t>(i));
  test::write_bytes(folder.files[4], trailing);
  EXPECT_EQ(decode_error_of(dataset, 4), "");
}

// Arithmetic-coded files are checked whole before either path decodes them, whatever the crop: both count the same.
TEST_F(DatasetTest, ArithmeticCodedDataCutShortIsABadSampleOnBothPaths) {
  const ImageFolder folder = scan_image_folder(root_.string());
  const JpegFolderDataset dataset(folder, train_transform());
  const std::vector<uint8_t> pixels = test::smooth_image(120, 160, 0.3);
  const std::vector<uint8_t> whole = codecs::encode_jpeg(pixels.data(), 120, 160, 3, 90, false, /*arithmetic=*/true);
  test::write_bytes(folder.files[0], whole);
  std::vector<uint8_t> half(whole.begin(), whole.begin() + static_cast<std::ptrdiff_t>(whole.size() / 2));
  half.push_back(0xFF);
  half.push_back(0xD9);
  test::write_bytes(folder.files[1], half);
  EncodedSample encoded;
  EXPECT_EQ(decode_error_of(dataset, 0), "");
  EXPECT_EQ(encoded_error_of(dataset, 0, encoded), "");
  EXPECT_TRUE(encoded.info.arithmetic);           // the GPU path routes it to libjpeg
  for (uint64_t epoch = 0; epoch < 3; ++epoch) {  // every crop
    const std::string message = rn50::testing::error_of<DecodeError>([&] { load(dataset, 1, epoch); });
    EXPECT_NE(message.find(folder.files[1] + ": truncated JPEG (the arithmetic-coded data ends"), std::string::npos)
        << message;
    EXPECT_EQ(rn50::testing::error_of<DecodeError>([&] { dataset.load_encoded(1, epoch, encoded); }), message);
  }
}

TEST_F(DatasetTest, EncodedSamplesCarryTheFileAndTheCpuPathsCropAndFlip) {
  const SampleTransform transform = train_transform();
  const JpegFolderDataset dataset(scan_image_folder(root_.string()), transform);
  EncodedSample encoded;
  for (size_t i = 0; i < dataset.size(); ++i) {
    for (uint64_t epoch = 0; epoch < 2; ++epoch) {
      dataset.load_encoded(i, epoch, encoded);
      const std::vector<uint8_t> bytes = test::read_bytes(dataset.describe(i));
      EXPECT_EQ(encoded.bytes, bytes);
      EXPECT_EQ(encoded.index, i);
      const codecs::JpegInfo info = codecs::read_jpeg_header(bytes.data(), bytes.size());
      EXPECT_EQ(encoded.info.width, info.width);
      EXPECT_EQ(encoded.info.height, info.height);
      EXPECT_EQ(encoded.info.components, info.components);
      const SampleGeometry expected = sample_geometry(transform, info.width, info.height, epoch, i);
      EXPECT_EQ(encoded.geometry.rect.x, expected.rect.x);
      EXPECT_EQ(encoded.geometry.rect.y, expected.rect.y);
      EXPECT_EQ(encoded.geometry.rect.width, expected.rect.width);
      EXPECT_EQ(encoded.geometry.rect.height, expected.rect.height);
      EXPECT_EQ(encoded.geometry.flip, expected.flip);
      // The CPU path decodes exactly this crop and flip.
      std::vector<uint8_t> decoded(32 * 32 * 3);
      codecs::DecodeScratch scratch;
      codecs::decode_crop_resize(bytes.data(), bytes.size(), expected.rect, 32, 32, expected.flip, decoded.data(),
                                 scratch);
      EXPECT_EQ(load(dataset, i, epoch), decoded);
    }
  }
}

// The flip is a fair coin drawn after the crop: half the samples flip, small and large crops alike, and turning
// the flip off leaves every crop where it was.
TEST(SampleGeometry, FlipsHalfTheSamplesWhateverTheCrop) {
  SampleTransform transform;
  transform.seed = 8;
  SampleTransform no_flip = transform;
  no_flip.random_flip = false;
  const int draws = 20000;
  int flips = 0, small = 0, small_flips = 0;
  for (int i = 0; i < draws; ++i) {
    const SampleGeometry g = sample_geometry(transform, 640, 480, 2, static_cast<size_t>(i));
    flips += g.flip;
    if (g.rect.width * g.rect.height < 0.3 * 640 * 480) {
      ++small;
      small_flips += g.flip;
    }
    const SampleGeometry unflipped = sample_geometry(no_flip, 640, 480, 2, static_cast<size_t>(i));
    ASSERT_FALSE(unflipped.flip);
    ASSERT_EQ(unflipped.rect.x, g.rect.x);
    ASSERT_EQ(unflipped.rect.width, g.rect.width);
  }
  // Binomial(20000, 0.5): one standard deviation is 0.0035 of the rate.
  EXPECT_NEAR(static_cast<double>(flips) / draws, 0.5, 0.015);
  ASSERT_GT(small, 2000);
  EXPECT_NEAR(static_cast<double>(small_flips) / small, 0.5, 0.04);
  // Validation: the centre crop, never flipped.
  SampleTransform val;
  val.train = false;
  val.image_size = 224;
  val.resize_size = 256;
  for (size_t i = 0; i < 50; ++i) {
    const SampleGeometry g = sample_geometry(val, 500, 375, i, i);
    EXPECT_FALSE(g.flip);
    EXPECT_EQ(g.rect.x, center_crop_after_resize(500, 375, 256, 224).x);
  }
}

TEST_F(DatasetTest, RejectsNonsenseTransforms) {
  SampleTransform t = val_transform();
  t.resize_size = 16;  // smaller than the crop
  EXPECT_THROW(JpegFolderDataset(scan_image_folder(root_.string()), t), ConfigError);
  t = train_transform();
  t.image_size = 0;
  EXPECT_THROW(JpegFolderDataset(scan_image_folder(root_.string()), t), ConfigError);
}

TEST(EpochOrder, IsADeterministicPermutationThatChangesEachEpoch) {
  const size_t n = 1000;
  const std::vector<size_t> order = epoch_order(n, 3, 0, true);
  std::vector<size_t> sorted = order;
  std::sort(sorted.begin(), sorted.end());
  for (size_t i = 0; i < n; ++i) ASSERT_EQ(sorted[i], i);
  EXPECT_EQ(order, epoch_order(n, 3, 0, true));
  EXPECT_NE(order, epoch_order(n, 3, 1, true));
  EXPECT_NE(order, epoch_order(n, 4, 0, true));
  std::vector<size_t> identity(n);
  for (size_t i = 0; i < n; ++i) identity[i] = i;
  EXPECT_EQ(epoch_order(n, 3, 5, false), identity);
  EXPECT_TRUE(epoch_order(0, 1, 1, true).empty());
  EXPECT_EQ(epoch_order(1, 1, 1, true), std::vector<size_t>{0});
}

TEST(EpochOrder, IsTheSameOnEveryPlatform) {
  // Fixed values: the shuffle uses only mt19937_64 (fully specified) and our own bounded draw, so any standard
  // library must give exactly this.
  EXPECT_EQ(epoch_order(10, 1, 0, true), (std::vector<size_t>{6, 5, 7, 0, 9, 4, 1, 8, 2, 3}));
}

TEST(EpochOrder, RanksTakeDisjointEqualShares) {
  const size_t n = 1003;
  const int world = 4;
  const std::vector<size_t> all = epoch_order(n, 8, 2, true);
  std::set<size_t> seen;
  for (int rank = 0; rank < world; ++rank) {
    const std::vector<size_t> mine = epoch_order(n, 8, 2, true, rank, world);
    ASSERT_EQ(mine.size(), n / world);
    for (size_t k = 0; k < mine.size(); ++k) {
      EXPECT_EQ(mine[k], all[rank + k * world]);
      EXPECT_TRUE(seen.insert(mine[k]).second) << "sample " << mine[k] << " given to two ranks";
    }
  }
  EXPECT_EQ(seen.size(), (n / world) * world);
  EXPECT_THROW(epoch_order(n, 8, 2, true, 4, 4), ConfigError);
  EXPECT_THROW(epoch_order(n, 8, 2, true, 0, 0), ConfigError);
}

}  // namespace
}  // namespace rn50::data
