// tests/trainer/test_metrics.cpp: the metrics file: whole records, a torn last line cut off, and on resume the
// records past the checkpoint dropped.
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "trainer/metrics.h"
#include "tests/support/temp_dir.h"

namespace rn50::trainer {
namespace {

std::string contents(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

void write(const std::string& path, const std::string& text) { std::ofstream(path, std::ios::binary) << text; }

std::string start_line(bool resumed, int64_t epoch, int64_t step) {
  return "{\"epoch\":" + std::to_string(epoch) + ",\"resumed\":" + (resumed ? "true" : "false") +
         ",\"step\":" + std::to_string(step) + ",\"type\":\"start\"}\n";
}

std::string step_line(int64_t epoch, int64_t step) {
  return "{\"epoch\":" + std::to_string(epoch) + ",\"step\":" + std::to_string(step) + ",\"type\":\"step\"}\n";
}

TEST(MetricsLog, ATornLastLineIsCutOffAndEveryRecordIsAWholeLine) {
  rn50::testing::TempDir dir;
  const std::string path = dir.file("metrics.jsonl");
  const std::string torn = "{\"type\":\"epoch\",\"epo";  // a record cut short by a full disk or a kill
  write(path, step_line(1, 1) + step_line(1, 2) + torn);
  {
    MetricsLog log(path);
    EXPECT_NE(log.repaired().find("cut a torn last line of " + std::to_string(torn.size()) + " bytes"),
              std::string::npos)
        << log.repaired();
    log.write(StepRecord{1, 3, 2.5, 0.1, 100});
  }
  const std::string text = contents(path);
  EXPECT_EQ(text.find("\"epo\n"), std::string::npos);
  EXPECT_EQ(text.substr(0, 2 * step_line(1, 1).size()), step_line(1, 1) + step_line(1, 2));
  EXPECT_NE(text.find("\"step\":3"), std::string::npos);
  EXPECT_EQ(text.back(), '\n');
  EXPECT_FALSE(rn50::testing::file_exists(path + ".tmp"));
  MetricsLog again(path);
  EXPECT_EQ(again.repaired(), "");  // a whole file is left as it is, with the next run's start record after it
  EXPECT_EQ(contents(path), text + start_line(false, 0, 0));
}

TEST(MetricsLog, OnResumeRecordsPastTheCheckpointAreDropped) {
  rn50::testing::TempDir dir;
  const std::string path = dir.file("metrics.jsonl");
  std::string text;
  for (int64_t s = 1; s <= 6; ++s) {
    text += step_line((s + 2) / 3, s);
    if (s % 3 == 0) text += "{\"epoch\":" + std::to_string(s / 3) + ",\"type\":\"epoch\"}\n";
  }
  write(path, text + "not a record\n");
  // The checkpoint after epoch 1 (step 3): the interrupted run's steps 4-6 and epoch 2 are redone by the resumed run.
  const MetricsLog log(path, ResumePoint{1, 3});
  EXPECT_NE(log.repaired().find("dropped 5 records past the resumed checkpoint"), std::string::npos) << log.repaired();
  EXPECT_EQ(contents(path), step_line(1, 1) + step_line(1, 2) + step_line(1, 3) + "{\"epoch\":1,\"type\":\"epoch\"}\n" +
                                start_line(true, 1, 3));
}

// Only the resumed run's own records past the checkpoint go: a run before it in the file (a fresh run appended to a
// used out_dir) is history and stays whole, though its numbers are past the checkpoint.
TEST(MetricsLog, OnResumeAnEarlierRunInTheFileStaysWhole) {
  rn50::testing::TempDir dir;
  const std::string path = dir.file("metrics.jsonl");
  const std::string earlier = start_line(false, 0, 0) + step_line(1, 5) + "{\"epoch\":1,\"type\":\"epoch\"}\n" +
                              step_line(2, 10) + "{\"epoch\":2,\"type\":\"epoch\"}\n";
  const std::string kept = start_line(false, 0, 0) + step_line(1, 2) + "{\"epoch\":1,\"type\":\"epoch\"}\n";
  write(path, earlier + kept + step_line(2, 4) + "{\"epoch\":2,\"type\":\"stop\",\"step\":4}\n");
  const MetricsLog log(path, ResumePoint{1, 2});
  EXPECT_NE(log.repaired().find("dropped 2 records"), std::string::npos) << log.repaired();
  EXPECT_EQ(contents(path), earlier + kept + start_line(true, 1, 2));
}

// A step record carries the interval's utilisation; an unavailable metric is null, never 0.
TEST(MetricsLog, StepRecordsCarryTheirUtilisationWithNullForUnavailable) {
  rn50::testing::TempDir dir;
  const std::string path = dir.file("metrics.jsonl");
  {
    MetricsLog log(path);
    StepRecord record{2, 40, 1.5, 0.05, 900};
    record.extra = {{"gpu_util_pct", 97.5}, {"tensor_util_pct", std::nullopt}};
    log.write(record);
  }
  EXPECT_EQ(contents(path),
            start_line(false, 0, 0) +
                "{\"epoch\":2,\"gpu_util_pct\":97.5,\"images_per_s\":900.0,\"loss\":1.5,\"lr\":0.05,\"step\":40,"
                "\"tensor_util_pct\":null,\"type\":\"step\"}\n");
}

// A resumed run's best epoch is its own: a fresh run appended to a used out_dir's file starts its epochs at 1 again,
// and the earlier run's better epoch once stood as the resumed run's best (and kept checkpoint_best from it).
TEST(BestEpoch, IsTheLastRunsOfTheFile) {
  rn50::testing::TempDir dir;
  auto epoch = [](int e, double top1) {
    return "{\"epoch\":" + std::to_string(e) + ",\"top1\":" + std::to_string(top1) + ",\"type\":\"epoch\"}\n";
  };
  write(dir.file("m.jsonl"), epoch(1, 1.0) + epoch(2, 0.9) + epoch(1, 0.5) + step_line(2, 7) + epoch(2, 0.75));
  auto best = best_epoch_in(dir.file("m.jsonl"));
  ASSERT_TRUE(best.has_value());
  EXPECT_EQ(best->epoch, 2);
  EXPECT_DOUBLE_EQ(best->top1, 0.75);
  write(dir.file("m.jsonl"), epoch(1, 0.25) + epoch(2, 0.5) + epoch(3, 0.375));
  best = best_epoch_in(dir.file("m.jsonl"));
  ASSERT_TRUE(best.has_value());
  EXPECT_EQ(best->epoch, 2);
  EXPECT_FALSE(best_epoch_in(dir.file("missing.jsonl")).has_value());
}

// A fresh run's start record begins another run though it wrote no epoch yet: the earlier run's best is not its.
TEST(BestEpoch, AFreshStartRecordEndsTheEarlierRunsBest) {
  rn50::testing::TempDir dir;
  const std::string earlier = "{\"epoch\":1,\"top1\":0.9,\"type\":\"epoch\"}\n";
  write(dir.file("m.jsonl"), start_line(false, 0, 0) + earlier + start_line(false, 0, 0));
  EXPECT_FALSE(best_epoch_in(dir.file("m.jsonl")).has_value());
  // A resume's start record continues its run.
  write(dir.file("m.jsonl"), start_line(false, 0, 0) + earlier + start_line(true, 1, 3));
  ASSERT_TRUE(best_epoch_in(dir.file("m.jsonl")).has_value());
  EXPECT_EQ(best_epoch_in(dir.file("m.jsonl"))->top1, 0.9);
}

}  // namespace
}  // namespace rn50::trainer
