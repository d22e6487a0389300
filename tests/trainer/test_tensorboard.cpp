// tests/trainer/test_tensorboard.cpp: TensorBoard's event files against the format, read by a reader of their own
// (tests/support/event_reader.h): CRC-32C's check values, the framing, the first Event's file_version, one scalar
// Event per point with its tag, step and value, null values left out; a resumed run's cut of the interrupted run's
// points, a fresh run's removal of an earlier run's files; the metrics file's sinks.
#include "trainer/tensorboard.h"

#include <dirent.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "tests/support/event_reader.h"
#include "tests/support/temp_dir.h"

namespace rn50::trainer::tensorboard {
namespace {

// The event files in `dir`, by name (POSIX calls: see tests/support/temp_dir.h).
std::vector<std::string> event_files(const std::string& dir) {
  std::vector<std::string> out;
  DIR* d = ::opendir(dir.c_str());
  if (!d) return out;
  while (const dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (name.find("tfevents") != std::string::npos) out.push_back(dir + "/" + name);
  }
  ::closedir(d);
  std::sort(out.begin(), out.end());
  return out;
}

// tag -> (step, value) of every scalar in a file read by the test's own reader.
std::multimap<std::string, std::pair<int64_t, float>> scalars_in(const std::string& path) {
  const testing::EventFileRead read = testing::read_events(path);
  EXPECT_EQ(read.error, "") << path;
  std::multimap<std::string, std::pair<int64_t, float>> out;
  for (const auto& e : read.events) {
    for (const auto& [tag, value] : e.values) out.emplace(tag, std::make_pair(e.step, value));
  }
  return out;
}

TEST(Crc32c, GivesTheCheckValuesOfTheCastagnoliPolynomial) {
  // RFC 3720 (iSCSI), B.4: 32 bytes of zeros; and the usual check string.
  const std::string zeros(32, '\0'), digits = "123456789";
  EXPECT_EQ(crc32c(zeros.data(), zeros.size()), 0x8a9136aau);
  EXPECT_EQ(crc32c(digits.data(), digits.size()), 0xe3069283u);
  // In pieces as at once, and the table as the bitwise definition on every byte value.
  EXPECT_EQ(crc32c(digits.data() + 4, 5, crc32c(digits.data(), 4)), 0xe3069283u);
  std::string all;
  for (int b = 0; b < 256; ++b) all.push_back(static_cast<char>(b));
  EXPECT_EQ(crc32c(all.data(), all.size()), testing::crc32c_bitwise(all));
  EXPECT_EQ(masked_crc32c(digits.data(), digits.size()), testing::masked(0xe3069283u));
}

TEST(EventFile, RecordsAreFramedWithTheLengthTheMaskedCrcsAndTheData) {
  const std::string data = "abc";
  const std::string record = frame_record(data);
  ASSERT_EQ(record.size(), 8u + 4 + 3 + 4);
  EXPECT_EQ(record.substr(0, 8), std::string("\x03\0\0\0\0\0\0\0", 8));
  EXPECT_EQ(testing::little_endian(record.substr(8, 4)), testing::masked(testing::crc32c_bitwise(record.substr(0, 8))));
  EXPECT_EQ(record.substr(12, 3), data);
  EXPECT_EQ(testing::little_endian(record.substr(15, 4)), testing::masked(testing::crc32c_bitwise(data)));
  // The scalar Event's bytes, field by field: wall_time (1, double), step (2, varint), summary (5) holding one value
  // (1) with tag (1) and simple_value (2, float).
  const testing::Message event = testing::parse_message(scalar_event(1.5, 300, "train/loss", 2.25f));
  ASSERT_EQ(event.error, "");
  EXPECT_EQ(event.wire_types.at(1), 1);
  EXPECT_EQ(event.numbers.at(2).at(0), 300u);
  const testing::Message summary = testing::parse_message(event.bytes.at(5).at(0));
  ASSERT_EQ(summary.bytes.at(1).size(), 1u);
  const testing::Message value = testing::parse_message(summary.bytes.at(1).at(0));
  EXPECT_EQ(value.bytes.at(1).at(0), "train/loss");
  EXPECT_EQ(value.wire_types.at(2), 5);
  EXPECT_EQ(value.numbers.at(2).at(0), 0x40100000u);  // 2.25f
}

TEST(EventLog, WritesTheVersionThenOneScalarEventPerPointLeavingNullsOut) {
  rn50::testing::TempDir dir;
  std::string path;
  {
    EventLog log(dir.path(), std::nullopt);
    path = log.path();
    StepRecord step{1, 50, 2.5, 0.1, 123.5};
    step.extra = {{"gpu_util_pct", 97.0}, {"tensor_util_pct", std::nullopt}};
    log.write(step);
    EpochRecord epoch;
    epoch.epoch = 1;
    epoch.train_loss = 2.4;
    epoch.val_loss = 2.0;
    epoch.top1 = 0.375;
    epoch.images_per_s = 120;
    epoch.data_wait_s = 0.5;
    epoch.extra = {{"gpu_util_pct_mean", std::nullopt}, {"input_s", 0.25}};
    log.write(epoch);
  }
  ASSERT_EQ(event_files(dir.path()), std::vector<std::string>{path});
  const std::string name = path.substr(dir.path().size() + 1);
  EXPECT_EQ(name.rfind("events.out.tfevents.", 0), 0u) << name;
  EXPECT_TRUE(is_event_file_name(name));
  const testing::EventFileRead read = testing::read_events(path);
  ASSERT_EQ(read.error, "");
  ASSERT_FALSE(read.events.empty());
  EXPECT_EQ(read.events[0].file_version, "brain.Event:2");
  EXPECT_GT(read.events[0].wall_time, 1.7e9);  // seconds since 1970, now
  for (size_t i = 1; i < read.events.size(); ++i) EXPECT_EQ(read.events[i].values.size(), 1u) << i;
  const auto scalars = scalars_in(path);
  auto only = [&](const std::string& tag) {
    EXPECT_EQ(scalars.count(tag), 1u) << tag;
    return scalars.count(tag) ? scalars.find(tag)->second : std::make_pair(int64_t{-1}, 0.0f);
  };
  EXPECT_EQ(only("train/loss"), std::make_pair(int64_t{50}, 2.5f));  // step records at the global step
  EXPECT_EQ(only("train/lr"), std::make_pair(int64_t{50}, 0.1f));
  EXPECT_EQ(only("train/images_per_s"), std::make_pair(int64_t{50}, 123.5f));
  EXPECT_EQ(only("train/gpu_util_pct"), std::make_pair(int64_t{50}, 97.0f));
  EXPECT_EQ(scalars.count("train/tensor_util_pct"), 0u);                  // null: unavailable, never drawn as 0
  EXPECT_EQ(only("epoch/train_loss"), std::make_pair(int64_t{1}, 2.4f));  // epoch records at the epoch
  EXPECT_EQ(only("epoch/val_loss"), std::make_pair(int64_t{1}, 2.0f));
  EXPECT_EQ(only("epoch/top1"), std::make_pair(int64_t{1}, 37.5f));  // in percent
  EXPECT_EQ(scalars.count("epoch/top5"), 0u);
  EXPECT_EQ(only("epoch/images_per_s"), std::make_pair(int64_t{1}, 120.0f));
  EXPECT_EQ(only("epoch/data_wait_s"), std::make_pair(int64_t{1}, 0.5f));
  EXPECT_EQ(only("epoch/input_s"), std::make_pair(int64_t{1}, 0.25f));
  EXPECT_EQ(scalars.count("epoch/gpu_util_pct_mean"), 0u);
  EXPECT_EQ(scalars.count("epoch/peak_gpu_mem_gib"), 0u);
}

// Three epochs of two steps, a record every step.
void write_run(EventLog& log) {
  for (int64_t s = 1; s <= 6; ++s) {
    log.write(StepRecord{(s + 1) / 2, s, 1.0 / static_cast<double>(s), 0.1, 100});
    if (s % 2 == 0) {
      EpochRecord e;
      e.epoch = s / 2;
      e.train_loss = 1.0 / static_cast<double>(s);
      log.write(e);
    }
  }
}

TEST(EventLog, AResumedRunCutsTheInterruptedRunsPointsPastItsCheckpoint) {
  rn50::testing::TempDir dir;
  std::string first;
  {
    EventLog log(dir.path(), std::nullopt);
    first = log.path();
    write_run(log);
  }
  // The checkpoint after epoch 1 (step 2): the interrupted run's steps 3-6 and epochs 2-3 are the resumed run's.
  EventLog resumed(dir.path(), ResumePoint{1, 2});
  EXPECT_NE(resumed.path(), first);  // a file of its own, even within the same second
  EXPECT_NE(resumed.repaired().find("dropped"), std::string::npos) << resumed.repaired();
  const auto kept = scalars_in(first);
  EXPECT_EQ(kept.count("train/loss"), 2u);
  EXPECT_EQ(kept.count("epoch/train_loss"), 1u);
  for (const auto& [tag, point] : kept) {
    EXPECT_LE(point.first, tag.rfind("epoch/", 0) == 0 ? 1 : 2) << tag;
  }
  EXPECT_EQ(testing::read_events(first).events.at(0).file_version, "brain.Event:2");
  EXPECT_EQ(scalars_in(resumed.path()).size(), 0u);
  EXPECT_EQ(event_files(dir.path()).size(), 2u);
  EXPECT_TRUE(EventLog(dir.path(), ResumePoint{1, 2}).repaired().empty());  // nothing left to cut
}

TEST(EventLog, AFreshRunRemovesAnEarlierRunsFilesAndATornTailIsCut) {
  rn50::testing::TempDir dir;
  std::string first;
  {
    EventLog log(dir.path(), std::nullopt);
    first = log.path();
    write_run(log);
  }
  const size_t whole = testing::read_events(first).events.size();
  std::ofstream(first, std::ios::binary | std::ios::app) << std::string("\x40\0\0\0\0\0", 6);  // a kill mid-record
  EXPECT_EQ(read_event_file(first).events.size(), whole);
  EXPECT_EQ(read_event_file(first).torn_bytes, 6u);
  {
    EventLog resumed(dir.path(), ResumePoint{3, 6});  // every point kept: only the torn bytes go
    EXPECT_NE(resumed.repaired().find("cut 6 torn bytes"), std::string::npos) << resumed.repaired();
    EXPECT_EQ(testing::read_events(first).error, "");
    EXPECT_EQ(testing::read_events(first).events.size(), whole);
  }
  EventLog fresh(dir.path(), std::nullopt);
  EXPECT_NE(fresh.repaired().find("removed 2 event files of an earlier run"), std::string::npos) << fresh.repaired();
  EXPECT_EQ(event_files(dir.path()), std::vector<std::string>{fresh.path()});
}

class ThrowingSink final : public RecordSink {
 public:
  explicit ThrowingSink(int* calls) : calls_(calls) {}
  std::string name() const override { return "the failing sink"; }
  void write(const StepRecord&) override {
    ++*calls_;
    throw std::runtime_error("disk full");
  }

 private:
  int* calls_;
};

TEST(MetricsLog, ASinkThatFailsIsDroppedAndTheMetricsFileGoesOn) {
  rn50::testing::TempDir dir;
  int calls = 0;
  {
    MetricsLog log(dir.file("metrics.jsonl"));
    log.add_sink(std::make_unique<ThrowingSink>(&calls));
    auto events = std::make_unique<EventLog>(dir.path(), std::nullopt);
    const std::string events_path = events->path();
    log.add_sink(std::move(events));
    log.write(StepRecord{1, 1, 1.0, 0.1, 10});
    log.write(StepRecord{1, 2, 1.0, 0.1, 10});
    EXPECT_EQ(scalars_in(events_path).count("train/loss"), 2u);  // the sink after the failing one still gets both
  }
  EXPECT_EQ(calls, 1);
  std::ifstream in(dir.file("metrics.jsonl"));
  int lines = 0;
  for (std::string line; std::getline(in, line);) ++lines;
  EXPECT_EQ(lines, 3);  // the start record and both steps
}

}  // namespace
}  // namespace rn50::trainer::tensorboard
