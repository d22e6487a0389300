// tests/core/test_files.cpp: RegularFile's refusals and reads, LineReader's lines and long-line skips, and
// write_atomically's all-or-nothing replacement.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "core/files.h"
#include "tests/support/files.h"
#include "tests/support/temp_dir.h"

namespace rn50::files {
namespace {

using rn50::testing::TempDir;

long peak_rss_kib() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_maxrss;
}

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

// Every line LineReader gives for `text` with lines of at most `max_line` bytes, and the long ones it skipped.
std::vector<std::string> lines_of(const std::string& text, size_t max_line, int64_t* long_lines) {
  TempDir dir;
  rn50::testing::write_file(dir.file("t"), std::vector<uint8_t>(text.begin(), text.end()));
  LineReader reader(dir.file("t"), 1 << 30, max_line);
  std::vector<std::string> out;
  for (std::string line; reader.next(line);) out.push_back(line);
  *long_lines = reader.long_lines();
  return out;
}

TEST(Files, LineReaderGivesTheLinesGetlineGives) {
  int64_t skipped = -1;
  for (const std::string text : {"", "a", "a\n", "a\n\nb", "\n\n", "x\r\ny\n", "one\ntwo\nthree"}) {
    std::istringstream in(text);
    std::vector<std::string> expected;
    for (std::string line; std::getline(in, line);) expected.push_back(line);
    EXPECT_EQ(lines_of(text, 100, &skipped), expected) << "'" << text << "'";
    EXPECT_EQ(skipped, 0);
  }
  // Lines across the 64 KiB reads.
  const std::string a(100000, 'a'), b(70000, 'b');
  EXPECT_EQ(lines_of(a + "\n" + b + "\nc", 1 << 20, &skipped), (std::vector<std::string>{a, b, "c"}));
}

TEST(Files, LineReaderSkipsAndCountsLinesOverItsLimitWithoutHoldingThem) {
  int64_t skipped = 0;
  EXPECT_EQ(lines_of("12345\n123456\nok\n" + std::string(200000, 'x') + "\nend", 5, &skipped),
            (std::vector<std::string>{"12345", "ok", "end"}));
  EXPECT_EQ(skipped, 2);
  EXPECT_EQ(lines_of("first\n" + std::string(200000, 'x'), 5, &skipped), (std::vector<std::string>{"first"}));
  EXPECT_EQ(skipped, 1);  // a long last line without its newline counts too
  // A 64 MiB line read with a 1 MiB limit: the process grows by its buffers, not by the line.
  TempDir dir;
  rn50::testing::write_file(dir.file("big"), {'z'});
  ASSERT_EQ(::truncate(dir.file("big").c_str(), off_t{64} << 20), 0);  // sparse: zeros, and no newline
  const long before = peak_rss_kib();
  LineReader reader(dir.file("big"), 1 << 30, 1 << 20);
  std::string line;
  EXPECT_FALSE(reader.next(line));
  EXPECT_EQ(reader.long_lines(), 1);
  EXPECT_LT(peak_rss_kib() - before, 16 << 10) << "KiB of peak memory for a 64 MiB line";
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

// Renaming over a FIFO, a device or a link would replace it (as root, report --out /dev/null made /dev/null a page):
// refused with its kind named, and left as it was.
TEST(Files, WriteAtomicallyRefusesToReplaceWhatIsNotARegularFile) {
  TempDir dir;
  const std::string fifo = dir.file("fifo");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0644), 0);
  const std::string target = dir.file("target"), link = dir.file("link");
  rn50::testing::write_file(target, {1, 2});
  ASSERT_EQ(::symlink(target.c_str(), link.c_str()), 0);
  for (const auto& [path, kind] :
       {std::pair<std::string, std::string>{fifo, "a FIFO"}, {link, "a symbolic link"}, {dir.path(), "a folder"}}) {
    try {
      write_atomically(path, std::vector<uint8_t>{3});
      ADD_FAILURE() << path << " was written";
    } catch (const std::runtime_error& e) {
      EXPECT_EQ(std::string(e.what()),
                "not writing " + path + ": it is " + kind + ", not a regular file, and would be replaced");
    }
    EXPECT_FALSE(rn50::testing::file_exists(temporary_path(path)));
  }
  struct stat status {};
  ASSERT_EQ(::lstat(fifo.c_str(), &status), 0);
  EXPECT_TRUE(S_ISFIFO(status.st_mode));
  ASSERT_EQ(::lstat(link.c_str(), &status), 0);
  EXPECT_TRUE(S_ISLNK(status.st_mode));
  EXPECT_EQ(rn50::testing::read_file(target), (std::vector<uint8_t>{1, 2}));
}

// A link planted where the temporary goes is removed, never written through: the file it names stays as it was (a
// link report.html.tmp -> metrics.jsonl once put the page in the run's metrics).
TEST(Files, WriteAtomicallyNeverWritesThroughALinkAtItsTemporary) {
  TempDir dir;
  const std::string path = dir.file("out"), victim = dir.file("victim");
  rn50::testing::write_file(victim, {9, 9});
  ASSERT_EQ(::symlink(victim.c_str(), temporary_path(path).c_str()), 0);
  write_atomically(path, std::vector<uint8_t>{4, 5});
  EXPECT_EQ(rn50::testing::read_file(path), (std::vector<uint8_t>{4, 5}));
  EXPECT_EQ(rn50::testing::read_file(victim), (std::vector<uint8_t>{9, 9}));
  EXPECT_FALSE(rn50::testing::file_exists(temporary_path(path)));
}

}  // namespace
}  // namespace rn50::files
