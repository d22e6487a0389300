// tests/data/test_image_folder.cpp: tests of scan_image_folder: class order, file order, labels and error cases.
#include "data/image_folder.h"

#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/errors.h"
#include "tests/support/test_support.h"

namespace rn50::data {
namespace {

namespace fs = std::filesystem;
using test::TempDir;

void touch(const fs::path& path) { test::write_bytes(path, {0xFF, 0xD8, 0xFF, 0xD9}); }

std::string data_error_of(const std::string& dir) {
  try {
    scan_image_folder(dir);
  } catch (const DataError& e) {
    return e.what();
  }
  return "";
}

TEST(ImageFolder, ClassesInByteOrderFilesSortedLabelsMatch) {
  TempDir tmp;
  const fs::path root = tmp.path() / "train";
  for (const char* cls : {"b2", "a", "B", "b10"}) {
    touch(root / cls / "z.JPEG");
    touch(root / cls / "m.jpg");
    touch(root / cls / "A.JpEg");
    test::write_bytes(root / cls / "notes.txt", {1});  // not an image
    test::write_bytes(root / cls / "pic.png", {1});    // not a JPEG
    test::write_bytes(root / cls / "jpeg", {1});       // no extension at all
  }
  touch(root / "loose_file.JPEG");  // files at class level are not classes
  // Sub-folders of a class are scanned as torchvision's os.walk does: after the class's own files.
  touch(root / "a" / "sub" / "0.jpeg");

  const ImageFolder folder = scan_image_folder(root.string());
  EXPECT_EQ(folder.classes, (std::vector<std::string>{"B", "a", "b10", "b2"}));
  const std::vector<std::string> expected_a = {(root / "a" / "A.JpEg").string(), (root / "a" / "m.jpg").string(),
                                               (root / "a" / "z.JPEG").string(),
                                               (root / "a" / "sub" / "0.jpeg").string()};
  ASSERT_EQ(folder.files.size(), 13u);
  ASSERT_EQ(folder.labels.size(), 13u);
  EXPECT_EQ(folder.files[0], (root / "B" / "A.JpEg").string());
  EXPECT_EQ(std::vector<std::string>(folder.files.begin() + 3, folder.files.begin() + 7), expected_a);
  const std::vector<int64_t> labels = {0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 3, 3, 3};
  EXPECT_EQ(folder.labels, labels);
  EXPECT_EQ(folder.files.back(), (root / "b2" / "z.JPEG").string());
}

// Links whose target cannot be read (self-looping, dangling) are listed like files, so that loading them counts a
// bad sample; they never stop the scan. A looping link named like a class folder is no class.
TEST(ImageFolder, LinksThatCannotBeFollowedAreListedNotFatal) {
  TempDir tmp;
  const fs::path root = tmp.path() / "train";
  touch(root / "a" / "good.JPEG");
  fs::create_symlink(root / "a" / "loop.JPEG", root / "a" / "loop.JPEG");
  fs::create_symlink(root / "a" / "nowhere.JPEG", root / "a" / "dangling.JPEG");
  fs::create_symlink(root / "b", root / "b");
  const ImageFolder folder = scan_image_folder(root.string());
  EXPECT_EQ(folder.classes, std::vector<std::string>{"a"});
  ASSERT_EQ(folder.files.size(), 3u);
  EXPECT_NE(folder.files[0].find("dangling.JPEG"), std::string::npos);
  EXPECT_NE(folder.files[2].find("loop.JPEG"), std::string::npos);
}

TEST(ImageFolder, ErrorsNameThePath) {
  TempDir tmp;
  const std::string missing = (tmp.path() / "train").string();
  EXPECT_EQ(data_error_of(missing), "dataset folder not found: " + missing);

  const fs::path file = tmp.path() / "file";
  touch(file);
  EXPECT_EQ(data_error_of(file.string()), "dataset path is not a folder: " + file.string());

  const fs::path no_classes = tmp.path() / "no_classes";
  touch(no_classes / "x.JPEG");
  EXPECT_EQ(data_error_of(no_classes.string()), "no class folders in " + no_classes.string());

  const fs::path empty_class = tmp.path() / "empty_class";
  touch(empty_class / "n01" / "x.JPEG");
  test::write_bytes(empty_class / "n02" / "x.png", {1});
  EXPECT_EQ(data_error_of(empty_class.string()), "class folder has no images: " + (empty_class / "n02").string());

  for (const std::string& message : {data_error_of(missing), data_error_of(empty_class.string())})
    EXPECT_EQ(message.find('\n'), std::string::npos);
}

}  // namespace
}  // namespace rn50::data
