// tests/doctor/test_storage_row.cpp: the doctor's storage row: what it reads under a folder, and its verdict for an
// empty folder, a folder too small to judge, and storage slower or faster than decoding.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "doctor/storage_row.h"
#include "tests/support/temp_dir.h"

namespace rn50::doctor {
namespace {

using testing::TempDir;

// Writes `bytes` bytes to dir/folder/name, making dir/folder.
void write_file(const TempDir& dir, const std::string& folder, const std::string& name, size_t bytes) {
  std::filesystem::create_directories(dir.file(folder));
  std::ofstream(dir.file(folder + "/" + name), std::ios::binary) << std::string(bytes, 'x');
}

TEST(StorageRead, ReadsRegularFilesInSubfoldersUpToTheLimit) {
  TempDir dir;
  write_file(dir, "train/a", "1.jpg", 1000);
  write_file(dir, "train/b", "2.jpg", 3000);
  std::filesystem::create_directories(dir.file("val/empty"));
  StorageRead read = read_storage(dir.path(), 1 << 20);
  EXPECT_EQ(read.files, 2);
  EXPECT_EQ(read.bytes, 4000);
  EXPECT_GT(read.first_mb_per_s, 0);
  EXPECT_GT(read.cached_mb_per_s, 0);
  read = read_storage(dir.path(), 500);  // stops at the first file that reaches the limit
  EXPECT_EQ(read.files, 1);
}

TEST(StorageRead, AnEmptyFolderReadsNothing) {
  TempDir dir;
  std::filesystem::create_directories(dir.file("train/a"));
  const StorageRead read = read_storage(dir.path(), 1 << 20);
  EXPECT_EQ(read.files, 0);
  EXPECT_EQ(read.bytes, 0);
  EXPECT_EQ(read.first_mb_per_s, 0);
}

// An empty dataset folder was once reported as storage too slow to feed the decoders (0 MB/s), not as empty.
TEST(StorageRow, AnEmptyFolderIsNamedNotCalledSlow) {
  const ReportRow row = storage_row(StorageRead{}, "/data/imagenet", 3000, 110);
  EXPECT_EQ(row.value, "no files");
  EXPECT_EQ(row.verdict, "bad");
  EXPECT_NE(row.note.find("/data/imagenet"), std::string::npos) << row.note;
  StorageRead zero_bytes;
  zero_bytes.files = 4;
  EXPECT_EQ(storage_row(zero_bytes, "/d", 3000, 110).value, "empty files");
}

TEST(StorageRow, TooLittleDataIsInformationNotAVerdict) {
  StorageRead read{6, 4 << 20, 1.0, 50.0};  // 1 MB/s would be far too slow, but 4 MiB cannot show it
  const ReportRow row = storage_row(read, "/d", 3000, 110);
  EXPECT_EQ(row.verdict, "info");
  EXPECT_NE(row.note.find("too little to judge"), std::string::npos) << row.note;
}

TEST(StorageRow, SlowerThanDecodingWarnsFasterIsOk) {
  // 110 KiB images: 200 MB/s feeds about 1,776 img/s, 2,000 MB/s about 17,756.
  StorageRead slow{1000, int64_t{110} << 20, 200.0, 3000.0};
  ReportRow row = storage_row(slow, "/d", 3000, 110);
  EXPECT_EQ(row.verdict, "warn");
  EXPECT_EQ(row.value, "200 / 3000 MB/s");
  EXPECT_NE(row.note.find("1000 files; first read feeds about 1776 img/s of 110 KiB"), std::string::npos) << row.note;
  StorageRead fast = slow;
  fast.first_mb_per_s = 2000;
  EXPECT_EQ(storage_row(fast, "/d", 3000, 110).verdict, "ok");
}

}  // namespace
}  // namespace rn50::doctor
