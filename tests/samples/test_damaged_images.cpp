// tests/samples/test_damaged_images.cpp: every file of the damaged-image generator does on the CPU decode path, and on
// the GPU path's host side, what the generator says: a counted bad sample or a decoded image.
#include "samples/damaged_images.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "codecs/jpeg_codec.h"
#include "core/errors.h"
#include "data/dataset.h"
#include "data/image_folder.h"
#include "tests/support/test_support.h"

namespace rn50::samples {
namespace {

using namespace rn50::data;  // the dataset that reads what the maker wrote

namespace fs = std::filesystem;

TEST(DamagedImages, EachIsABadSampleOrDecodesAsTheGeneratorSays) {
  test::TempDir tmp;
  const fs::path cls = tmp.path() / "train" / "n01";
  const std::vector<uint8_t> pixels = test::smooth_image(96, 72, 0.3);
  const std::vector<uint8_t> good = codecs::encode_jpeg(pixels.data(), 96, 72, 3, 90);
  test::write_bytes(cls / "good.JPEG", good);
  const DamagedCounts counts = write_damaged_images(cls.string(), good, /*special=*/true);
  std::map<std::string, bool> expect_bad;
  for (const DamagedImage& d : damaged_images(good)) expect_bad["damaged_" + d.kind + ".JPEG"] = d.bad;
  for (const char* name :
       {"damaged_fifo.JPEG", "damaged_link_loop.JPEG", "damaged_link_dangling.JPEG", "damaged_sparse_2gib.JPEG"})
    expect_bad[name] = true;
  expect_bad["good.JPEG"] = false;
  ASSERT_EQ(counts.files, static_cast<int>(expect_bad.size()) - 1);

  const ImageFolder folder = scan_image_folder((tmp.path() / "train").string());
  ASSERT_EQ(folder.files.size(), expect_bad.size());  // links and the FIFO are listed, to be counted
  SampleTransform transform;
  transform.image_size = 32;
  const JpegFolderDataset dataset(folder, transform);
  WorkerScratch scratch;
  std::vector<uint8_t> out(32 * 32 * 3);
  int bad = 0;
  for (size_t i = 0; i < folder.files.size(); ++i) {
    const std::string name = fs::path(folder.files[i]).filename().string();
    bool threw = false;
    try {
      dataset.load(i, 0, out.data(), scratch);
    } catch (const DecodeError& e) {
      threw = true;
      EXPECT_NE(std::string(e.what()).find(name), std::string::npos) << e.what();  // names the file
    }
    EXPECT_EQ(threw, expect_bad.at(name)) << name;
    bad += threw ? 1 : 0;
    // The GPU path's host side refuses the same files: scan data cut short too (fewer bits than its blocks need).
    EncodedSample encoded;
    bool encoded_threw = false;
    try {
      dataset.load_encoded(i, 0, encoded);
    } catch (const DecodeError&) {
      encoded_threw = true;
    }
    EXPECT_EQ(encoded_threw, expect_bad.at(name)) << name;
  }
  EXPECT_EQ(bad, counts.bad);
}

}  // namespace
}  // namespace rn50::samples
