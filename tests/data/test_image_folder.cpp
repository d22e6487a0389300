// tests/data/test_image_folder.cpp: tests of scan_image_folder: class order, file order, labels, links and error
// cases; class_difference.
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
  EXPECT_EQ(data_error_of((file / "train").string()), "data_root " + file.string() + " is a file, not a folder");

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

// Python's order, which torchvision's ImageFolder takes: by code point, a byte that is not UTF-8 (os.fsdecode's
// U+DC80 to U+DCFF) after U+D7FF and before U+E000. Byte order put "\x80" before "é" (0xC3 0xA9), and labels 0 and 1
// then meant the other classes in torchvision.
TEST(ImageFolder, ClassesInPythonsOrderWhereNamesAreNotUtf8) {
  TempDir tmp;
  const fs::path root = tmp.path() / "train";
  for (const char* cls : {"\x80", "\xc3\xa9", "\xee\x80\x80", "z"}) touch(root / cls / "x.JPEG");
  EXPECT_EQ(scan_image_folder(root.string()).classes,
            (std::vector<std::string>{"z", "\xc3\xa9", "\x80", "\xee\x80\x80"}));  // U+7A, U+E9, U+DC80, U+E000
}

// A linked sub-folder inside a class is walked, as torchvision's os.walk(followlinks=True) walks it (it was dropped
// without a word), each folder once: a link back up is no endless scan.
TEST(ImageFolder, LinkedSubFoldersAreWalkedOnce) {
  TempDir tmp;
  const fs::path root = tmp.path() / "train";
  touch(root / "a" / "1.JPEG");
  touch(tmp.path() / "shard" / "2.JPEG");
  touch(tmp.path() / "shard" / "3.JPEG");
  fs::create_directory_symlink(tmp.path() / "shard", root / "a" / "more");
  fs::create_directory_symlink(root / "a", root / "a" / "up");  // a cycle
  const ImageFolder folder = scan_image_folder(root.string());
  ASSERT_EQ(folder.files.size(), 3u);
  EXPECT_EQ(folder.files[1], (root / "a" / "more" / "2.JPEG").string());
}

// A class folder that is the split folder or a folder above it (a link to "." or ".."), or another class's folder,
// would count images under a second label: refused, naming it.
TEST(ImageFolder, AClassFolderThatIsTheSplitOrAnotherClassIsRefused) {
  TempDir tmp;
  const fs::path root = tmp.path() / "train";
  touch(root / "a" / "1.JPEG");
  touch(root / "b" / "2.JPEG");
  fs::create_directory_symlink(".", root / "zz_self");
  EXPECT_NE(data_error_of(root.string()).find("class folder " + (root / "zz_self").string() + " is "),
            std::string::npos);
  fs::remove(root / "zz_self");
  fs::create_directory_symlink("..", root / "zz_up");
  EXPECT_NE(data_error_of(root.string()).find("which holds the split folder itself"), std::string::npos);
  fs::remove(root / "zz_up");
  fs::create_directory_symlink("a", root / "c");
  EXPECT_NE(data_error_of(root.string()).find("class folders a and c of " + root.string() + " are one folder"),
            std::string::npos);
  fs::remove(root / "c");
  fs::create_directory_symlink(tmp.path() / "elsewhere", root / "c");  // a link to a folder of its own is a class
  touch(tmp.path() / "elsewhere" / "3.JPEG");
  EXPECT_EQ(scan_image_folder(root.string()).classes, (std::vector<std::string>{"a", "b", "c"}));
}

TEST(ClassDifference, NamesWhatEachListLacks) {
  EXPECT_EQ(class_difference({"a", "b", "c"}, {"a", "d"}, "train", "val"),
            "val lacks 'b', 'c'; val has 'd', which train lacks (3 in train, 2 in val)");
  std::vector<std::string> many;
  for (int i = 0; i < 8; ++i) many.push_back("n" + std::to_string(i));
  EXPECT_EQ(class_difference(many, {"n0"}, "train", "val"),
            "val lacks 'n1', 'n2', 'n3', 'n4', 'n5' and 2 more (8 in train, 1 in val)");
  EXPECT_EQ(class_difference({"a", "b"}, {"b", "a"}, "x", "y"),
            "the same names in another order, or one name twice (2 in x, 2 in y)");
}

}  // namespace
}  // namespace rn50::data
