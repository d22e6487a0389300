// tests/core/test_files.cpp: RegularFile's refusals and reads, and write_atomically's all-or-nothing replacement.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "core/files.h"
#include "tests/support/files.h"
#include "tests/support/temp_dir.h"

namespace rn50::files {
namespace {

using rn50::testing::TempDir;

// The kind of ReadError that opening `path` with `max_bytes` throws, and its message in `message`.
ReadError::Kind refusal(const std::string& path, uint64_t max_bytes, std::string* message) {
  try {
    const RegularFile file(path, max_bytes);
  } catch (const ReadError& e) {
    *message = e.what();
    return e.kind;
  }
  ADD_FAILURE() << path << " opened";
  return ReadError::Kind::kFailed;
}

TEST(Files, RefusesWhatIsNotARegularFileWithoutOpeningIt) {
  TempDir dir;
  const std::string fifo = dir.file("fifo");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  std::string message;
  EXPECT_EQ(refusal(fifo, 1 << 20, &message), ReadError::Kind::kNotRegular);  // opening it would block
  EXPECT_EQ(message, "cannot read " + fifo + ": not a regular file");
  EXPECT_EQ(refusal("/dev/zero", 1 << 20, &message), ReadError::Kind::kNotRegular);  // it would never end
  EXPECT_EQ(refusal(dir.path(), 1 << 20, &message), ReadError::Kind::kNotRegular);
  EXPECT_EQ(refusal(dir.file("none"), 1 << 20, &message), ReadError::Kind::kCannotOpen);
  EXPECT_EQ(message, "cannot read " + dir.file("none") + ": No such file or directory");
}

TEST(Files, RefusesAFileAboveTheLimitAndSaysItsSize) {
  TempDir dir;
  rn50::testing::write_file(dir.file("a"), std::vector<uint8_t>(101, 7));
  try {
    const RegularFile file(dir.file("a"), 100);
    FAIL() << "opened";
  } catch (const ReadError& e) {
    EXPECT_EQ(e.kind, ReadError::Kind::kTooLarge);
    EXPECT_EQ(e.size, 101u);
  }
  std::vector<uint8_t> bytes;
  read_whole(dir.file("a"), 101, bytes);
  EXPECT_EQ(bytes, std::vector<uint8_t>(101, 7));
}

TEST(Files, ReadsAtOffsetsAndNoticesAFileThatShrank) {
  TempDir dir;
  std::vector<uint8_t> content(1000);
  for (size_t i = 0; i < content.size(); ++i) content[i] = static_cast<uint8_t>(i * 7);
  rn50::testing::write_file(dir.file("a"), content);
  const RegularFile file(dir.file("a"));
  ASSERT_EQ(file.size(), 1000u);
  uint8_t middle[10];
  file.read_at(middle, sizeof middle, 500);
  EXPECT_EQ(std::vector<uint8_t>(middle, middle + 10),
            std::vector<uint8_t>(content.begin() + 500, content.begin() + 510));
  ASSERT_EQ(::truncate(dir.file("a").c_str(), 400), 0);
  try {
    file.read_at(middle, sizeof middle, 500);
    FAIL() << "read past the end";
  } catch (const ReadError& e) {
    EXPECT_EQ(e.kind, ReadError::Kind::kShrank);
  }
}

TEST(Files, WriteAtomicallyReplacesTheFileAndLeavesNoTemporary) {
  TempDir dir;
  const std::string path = dir.file("out");
  rn50::testing::write_file(path, {1, 2, 3});
  write_atomically(path, std::vector<uint8_t>{4, 5});
  EXPECT_EQ(rn50::testing::read_file(path), (std::vector<uint8_t>{4, 5}));
  EXPECT_FALSE(rn50::testing::file_exists(temporary_path(path)));
}

TEST(Files, AFailedWriteLeavesTheFileAsItWas) {
  TempDir dir;
  const std::string path = dir.file("out");
  rn50::testing::write_file(path, {1, 2, 3});
  ASSERT_EQ(::mkdir(temporary_path(path).c_str(), 0755), 0);  // the temporary cannot be created
  EXPECT_THROW(write_atomically(path, std::vector<uint8_t>{4, 5}), std::runtime_error);
  EXPECT_EQ(rn50::testing::read_file(path), (std::vector<uint8_t>{1, 2, 3}));
  EXPECT_THROW(write_atomically(dir.file("no/such/folder/out"), std::vector<uint8_t>{4}), std::runtime_error);
}

}  // namespace
}  // namespace rn50::files
