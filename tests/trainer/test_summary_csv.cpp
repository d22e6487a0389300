// tests/trainer/test_summary_csv.cpp: summary.csv: timm's columns, a row per epoch record with the record's own
// numbers (top-1 and top-5 in percent, nulls as empty cells), rewritten after each epoch, and on resume the rows of
// the metrics file's last run as its resume repair left it.
#include "trainer/summary_csv.h"

#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <string>

#include "tests/support/temp_dir.h"

namespace rn50::trainer {
namespace {

std::string contents(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

constexpr char kHeader[] = "epoch,train_loss,eval_loss,eval_top1,eval_top5,lr,images_per_s,wall_s,data_wait_s\n";

EpochRecord epoch_record(int64_t epoch) {
  EpochRecord r;
  r.epoch = epoch;
  r.train_loss = 2.5 / static_cast<double>(epoch);
  r.val_loss = 2.0;
  r.top1 = 0.125;
  r.lr = 0.1;
  r.images_per_s = 1234.5;
  r.wall_s = 10.25;
  r.data_wait_s = 0.5;
  return r;
}

TEST(SummaryCsv, AFreshRunHasTheHeaderAtOnceAndARowAfterEachEpoch) {
  rn50::testing::TempDir dir;
  const std::string path = dir.file("summary.csv");
  SummaryCsv csv(path, dir.file("metrics.jsonl"), /*resumed=*/false);
  EXPECT_EQ(contents(path), kHeader);
  csv.write(epoch_record(1));
  EXPECT_EQ(contents(path), std::string(kHeader) + "1,2.5,2,12.5,,0.1,1234.5,10.25,0.5\n");
  csv.write(epoch_record(3));
  EXPECT_EQ(
      contents(path),
      std::string(kHeader) + "1,2.5,2,12.5,,0.1,1234.5,10.25,0.5\n3,0.8333333333333334,2,12.5,,0.1,1234.5,10.25,0.5\n");
  EXPECT_FALSE(rn50::testing::file_exists(path + ".tmp"));
}

TEST(SummaryCsv, AResumedRunStartsFromTheLastRunsEpochRecordsInTheMetricsFile) {
  rn50::testing::TempDir dir;
  const std::string metrics = dir.file("metrics.jsonl");
  {
    // An earlier run of two epochs, then the run resumed: its step, its epoch 1 and a stop.
    MetricsLog log(metrics);
    log.write(epoch_record(1));
    log.write(epoch_record(2));
    log.write(StepRecord{1, 5, 1.0, 0.1, 10});
    EpochRecord e = epoch_record(1);
    e.val_loss = std::nullopt;
    e.top1 = 0.5;
    e.top5 = 0.75;
    log.write(e);
    log.write(StopRecord{2, 12, 2, "SIGTERM", 1.0, 1.0});
  }
  SummaryCsv csv(dir.file("summary.csv"), metrics, /*resumed=*/true);
  EXPECT_EQ(contents(dir.file("summary.csv")), std::string(kHeader) + "1,2.5,,50,75,0.1,1234.5,10.25,0.5\n");
  SummaryCsv fresh(dir.file("fresh.csv"), metrics, /*resumed=*/false);
  EXPECT_EQ(contents(dir.file("fresh.csv")), kHeader);  // a fresh run's rows are its own
}

}  // namespace
}  // namespace rn50::trainer
