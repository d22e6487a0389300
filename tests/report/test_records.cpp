// tests/report/test_records.cpp: reading what runs wrote: torn and stray lines skipped and counted, runs appended to
// one file told apart from a resumed one, train.log's start table, a run folder with and without run.json.
#include "report/records.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "core/errors.h"
#include "tests/support/temp_dir.h"

namespace rn50::report {
namespace {

void write(const std::string& path, const std::string& text) { std::ofstream(path, std::ios::binary) << text; }

std::string step(int epoch, int step_number, double loss) {
  return "{\"type\":\"step\",\"epoch\":" + std::to_string(epoch) + ",\"step\":" + std::to_string(step_number) +
         ",\"loss\":" + std::to_string(loss) + ",\"lr\":0.1,\"images_per_s\":100,\"gpu_util_pct\":null}\n";
}

std::string epoch(int number, double rate) {
  return "{\"type\":\"epoch\",\"epoch\":" + std::to_string(number) + ",\"images_per_s\":" + std::to_string(rate) +
         ",\"wall_s\":2.0,\"steps\":4,\"top1\":null}\n";
}

TEST(Records, BadLinesAreSkippedAndCountedNeverFatal) {
  rn50::testing::TempDir dir;
  const std::string path = dir.file("metrics.jsonl");
  write(path, step(1, 2, 2.0) + "not json\n" + "\n" + "[1,2]\n" + "{\"type\":\"other\",\"epoch\":1}\n" +
                  "{\"type\":\"epoch\"}\n" + epoch(1, 500) + step(2, 4, 1.5) + "{\"type\":\"epoch\",\"epo");
  const MetricsFile m = read_metrics(path);
  EXPECT_EQ(m.lines, 9);
  EXPECT_EQ(m.skipped, 6);  // not JSON, empty, not an object, unknown type, no epoch, torn
  EXPECT_EQ(m.runs, 1);
  ASSERT_EQ(m.epochs.size(), 1u);
  ASSERT_EQ(m.steps.size(), 2u);
  EXPECT_EQ(m.epochs[0].get("images_per_s"), 500.0);
  EXPECT_TRUE(m.epochs[0].has("top1"));
  EXPECT_EQ(m.epochs[0].get("top1"), std::nullopt);  // null stays unavailable
  EXPECT_EQ(m.steps[1].get("loss"), 1.5);
}

TEST(Records, ARunAppendedToTheFileIsToldApartAndTheLastOneKept) {
  rn50::testing::TempDir dir;
  const std::string path = dir.file("metrics.jsonl");
  // Two runs in one out_dir, as a recorded GPU-decoding session's files held them.
  write(path, step(1, 2, 3.0) + epoch(1, 100) + step(2, 4, 2.0) + epoch(2, 200) + step(1, 2, 3.1) + epoch(1, 110));
  const MetricsFile m = read_metrics(path);
  EXPECT_EQ(m.runs, 2);
  ASSERT_EQ(m.epochs.size(), 1u);
  EXPECT_EQ(m.epochs[0].get("images_per_s"), 110.0);
  ASSERT_EQ(m.steps.size(), 1u);
  EXPECT_EQ(m.steps[0].get("loss"), 3.1);
  // A resumed run continues the numbering (the file was cut at its checkpoint): still one run.
  write(path, step(1, 2, 3.0) + epoch(1, 100) + step(2, 4, 2.0) + epoch(2, 200));
  EXPECT_EQ(read_metrics(path).runs, 1);
}

std::string start(bool resumed, int epoch, int step_number) {
  return std::string("{\"type\":\"start\",\"resumed\":") + (resumed ? "true" : "false") +
         ",\"epoch\":" + std::to_string(epoch) + ",\"step\":" + std::to_string(step_number) + "}\n";
}

// A fresh run in a used out_dir stopped before its first record: its start record says the earlier run's figures
// are not its own (the page once gave a resnet34 run the resnet18 run's rate and best top-1).
TEST(Records, AFreshRunWithoutRecordsYetIsNotTheEarlierRun) {
  rn50::testing::TempDir dir;
  const std::string path = dir.file("metrics.jsonl");
  write(path, start(false, 0, 0) + step(1, 2, 3.0) + epoch(1, 100) + start(false, 0, 0) +
                  "{\"type\":\"stop\",\"epoch\":1,\"step\":0,\"epoch_step\":0,\"signal\":\"SIGTERM\"}\n");
  const MetricsFile m = read_metrics(path);
  EXPECT_EQ(m.runs, 2);
  EXPECT_TRUE(m.epochs.empty());
  EXPECT_TRUE(m.steps.empty());
  EXPECT_EQ(m.skipped, 0);  // start and stop records are rn50's own
  EXPECT_EQ(m.stops, 1);
  EXPECT_EQ(m.last_stop, "SIGTERM in epoch 1 after 0 of its steps");
}

// Each process's first epoch and an epoch resumed mid-way are warm-up: the medians leave them out.
TEST(Records, EachProcesssFirstEpochAndAResumedPartOfOneAreWarmUp) {
  rn50::testing::TempDir dir;
  const std::string path = dir.file("metrics.jsonl");
  const std::string partial = "{\"type\":\"epoch\",\"epoch\":3,\"images_per_s\":50,\"resumed_at_step\":9}\n";
  write(path, start(false, 0, 0) + epoch(1, 10) + epoch(2, 100) + "{\"type\":\"stop\",\"epoch\":3,\"step\":9}\n" +
                  start(true, 2, 9) + partial + epoch(4, 110) + start(true, 4, 16) + epoch(5, 30) + epoch(6, 120));
  const MetricsFile m = read_metrics(path);
  EXPECT_EQ(m.runs, 1);
  EXPECT_EQ(m.stops, 1);
  EXPECT_EQ(m.resumes, 2);
  std::vector<bool> warm;
  for (const auto& e : m.epochs) warm.push_back(e.warm_up);
  EXPECT_EQ(warm, (std::vector<bool>{true, false, true, false, true, false}));
  // Files from before start records: the run's first epoch and resumed_at_step only.
  write(path, epoch(1, 10) + epoch(2, 100) + partial);
  warm.clear();
  for (const auto& e : read_metrics(path).epochs) warm.push_back(e.warm_up);
  EXPECT_EQ(warm, (std::vector<bool>{true, false, true}));
}

// A run that logged every step keeps at most kMaxStepRecords of them, evenly: memory and the page stay bounded.
TEST(Records, StepRecordsBeyondTheLimitAreThinnedEvenly) {
  rn50::testing::TempDir dir;
  const std::string path = dir.file("metrics.jsonl");
  const int n = 3 * static_cast<int>(kMaxStepRecords) + 5;
  std::string text;
  for (int s = 1; s <= n; ++s) text += step(1, s, 1.0);
  write(path, text);
  const MetricsFile m = read_metrics(path);
  EXPECT_EQ(m.step_records, n);
  EXPECT_EQ(m.step_stride, 4);
  EXPECT_LE(m.steps.size(), kMaxStepRecords);
  ASSERT_EQ(m.steps.size(), static_cast<size_t>((n + 3) / 4));
  for (size_t i = 0; i < m.steps.size(); ++i) ASSERT_EQ(m.steps[i].get("step"), 1.0 + 4 * i) << i;
}

TEST(Records, AMissingFileIsADataErrorNamingIt) {
  try {
    read_metrics("/nonexistent/metrics.jsonl");
    FAIL() << "no error";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/metrics.jsonl"), std::string::npos) << e.what();
  }
}

constexpr char kLog[] =
    "rn50 launch: 2 processes, rendezvous at 127.0.0.1:59315\n"
    "[2026-11-30 00:26:27.266] [info] rn50 train\n"
    "[2026-11-30 00:26:27.266] [info]   model               resnet18\n"
    "[2026-11-30 00:26:27.266] [info]   a_run_before        x\n"
    "[2026-11-30 00:26:29.000] [info] epoch 1/1: 1.0 s\n"
    "[2026-11-30 00:27:42.752] [info] rn50 train\n"
    "[2026-11-30 00:27:42.752] [info]   model               resnet50\n"
    "[2026-11-30 00:27:42.752] [info]   data_root           \n"
    "[2026-11-30 00:27:42.752] [rank 1] [warning] something on another rank\n"
    "[2026-11-30 00:27:42.752] [info]   batch_size          256\n"
    "[2026-11-30 00:27:42.752] [info]   (device)            NVIDIA H200 (sm_90, 132 SMs, 140 GiB), driver CUDA 13.0\n"
    "[2026-11-30 00:27:42.752] [info]   (data parallel)     2 processes over nccl; 4 gradient buckets\n"
    "[2026-11-30 00:27:52.041] [info] epoch 1/2: 8.7 s, 5883 img/s\n";

TEST(Records, TheLastStartTableOfTrainLogIsRead) {
  const Rows rows = parse_start_table(kLog);
  ASSERT_EQ(rows.size(), 5u);
  EXPECT_EQ(rows[0], (std::pair<std::string, std::string>{"model", "resnet50"}));
  EXPECT_EQ(rows[1], (std::pair<std::string, std::string>{"data_root", ""}));
  EXPECT_EQ(rows[3].first, "(device)");
  EXPECT_EQ(rows[3].second, "NVIDIA H200 (sm_90, 132 SMs, 140 GiB), driver CUDA 13.0");
}

TEST(Records, ARunFolderWithoutRunJsonTakesItsMachineFromTrainLog) {
  rn50::testing::TempDir dir;
  write(dir.file("metrics.jsonl"), epoch(1, 5000) + epoch(2, 11900));
  write(dir.file("train.log"), kLog);
  const RunFolder run = read_run_folder(dir.path());
  EXPECT_EQ(run.config_from, "train.log");
  EXPECT_EQ(run.machine_from, "train.log");
  EXPECT_EQ(run.value("model"), "resnet50");
  EXPECT_EQ(run.found("device").rfind("NVIDIA H200", 0), 0u);
  EXPECT_EQ(run.world_size, 2);
  EXPECT_TRUE(run.cuda);
}

TEST(Records, ARunFolderReadsConfigYamlAndRunJsonFirst) {
  rn50::testing::TempDir dir;
  write(dir.file("metrics.jsonl"), epoch(1, 90));
  write(dir.file("train.log"), kLog);  // older than the two files below: not used for what they hold
  write(dir.file("config.yaml"), "model: resnet18\ndata_root: \"\"\nlr_milestones: [30,60,80]\ndevice: cpu\n");
  write(dir.file("run.json"), R"j({"host":"vm","cpu":"AMD EPYC","usable_cores":2,"world_size":1,
                                  "found":[["(device)","cpu"],["(classes)","4"]]})j");
  const RunFolder run = read_run_folder(dir.path());
  EXPECT_EQ(run.config_from, "config.yaml");
  EXPECT_EQ(run.machine_from, "run.json");
  EXPECT_EQ(run.value("model"), "resnet18");
  EXPECT_EQ(run.value("data_root"), "");
  EXPECT_EQ(run.value("lr_milestones"), "30,60,80");
  EXPECT_EQ(run.found("cpu"), "AMD EPYC");
  EXPECT_EQ(run.found("usable_cores"), "2");
  EXPECT_EQ(run.found("classes"), "4");
  EXPECT_EQ(run.world_size, 1);
  EXPECT_FALSE(run.cuda);
  EXPECT_FALSE(run.load_average.has_value());  // a run.json from before the load was recorded

  // The host's load before the run trained, against the host's CPUs (the usable cores where those are not recorded).
  write(dir.file("run.json"), R"j({"usable_cores":2,"host_cores":4,"load_average":[3.9,2.5,1.25],"found":[]})j");
  const RunFolder loaded = read_run_folder(dir.path());
  EXPECT_EQ(loaded.load_average, 3.9);
  EXPECT_EQ(loaded.load_cores, 4);
  EXPECT_EQ(loaded.found("load_average"), "3.90 2.50 1.25 (1, 5, 15 min) on 4 cores, before the run trained");
  write(dir.file("run.json"), R"j({"usable_cores":2,"load_average":[3.9,2.5,1.25],"found":[]})j");
  EXPECT_EQ(read_run_folder(dir.path()).load_cores, 2);
  write(dir.file("run.json"), R"j({"usable_cores":2,"load_average":null,"found":[]})j");
  EXPECT_FALSE(read_run_folder(dir.path()).load_average.has_value());
  // A count past an int is unknown, never cut to one (4294967298 processes read as 2).
  write(dir.file("run.json"), R"j({"world_size":4294967298,"found":[]})j");
  EXPECT_EQ(read_run_folder(dir.path()).world_size, 1);
}

// config.yaml's quoted values come back decoded (yaml-cpp writes what is not ASCII escaped, and the page showed
// "d\xe9" with its quotes).
TEST(Records, ConfigValuesAreDecodedAndALinkedConfigIsNotRead) {
  rn50::testing::TempDir dir;
  write(dir.file("metrics.jsonl"), epoch(1, 90));
  write(dir.file("config.yaml"),
        "model: resnet18\n"
        "data_root: \"/data/d\\xe9 j\\xe0/s: #1 \\u20ac\\U0001F600 \\\"q\\\" \\\\ \\q \\xZZ\"\n"
        "out_dir: 'it''s'\n"
        "init_from: \"\"\n"
        "lr_milestones: [30,60]\n");
  RunFolder run = read_run_folder(dir.path());
  EXPECT_EQ(run.value("data_root"),
            "/data/d\xc3\xa9 j\xc3\xa0/s: #1 \xe2\x82\xac\xf0\x9f\x98\x80 \"q\" \\ \\q \\xZZ");  // unknown: as written
  EXPECT_EQ(run.value("out_dir"), "it's");
  EXPECT_EQ(run.value("init_from"), "");
  EXPECT_EQ(run.value("lr_milestones"), "30,60");
  // A link would show a file from elsewhere as the run's configuration.
  write(dir.file("elsewhere"), "root: x\n");
  std::remove(dir.file("config.yaml").c_str());
  ASSERT_EQ(::symlink(dir.file("elsewhere").c_str(), dir.file("config.yaml").c_str()), 0);
  run = read_run_folder(dir.path());
  EXPECT_EQ(run.value("root"), "");
  ASSERT_EQ(run.unread.size(), 1u);
  EXPECT_EQ(run.unread[0], dir.file("config.yaml") + " is a symbolic link, not a file rn50 wrote");
}

TEST(Records, TheRunsNameResolvesDotsAndTrailingSlashes) {
  EXPECT_EQ(run_name("/runs/a"), "a");
  EXPECT_EQ(run_name("/runs/a/"), "a");
  EXPECT_EQ(run_name("/runs/a/."), "a");
  EXPECT_EQ(run_name("/runs/a/b/.."), "a");
  EXPECT_EQ(run_name("/"), "/");
}

TEST(Records, AFolderWithoutAMetricsFileIsRefusedWithOneLine) {
  rn50::testing::TempDir dir;
  try {
    read_run_folder(dir.path());
    FAIL() << "no error";
  } catch (const DataError& e) {
    EXPECT_EQ(std::string(e.what()), dir.path() + ": no metrics.jsonl (not the out_dir of an rn50 train run)");
  }
}

TEST(Records, LinesOverOneMebibyteAreSkippedAndCountedNeverHeld) {
  rn50::testing::TempDir dir;
  const std::string huge = "{\"type\":\"step\",\"epoch\":1,\"note\":\"" + std::string(kMaxLineBytes, 'a') + "\"}\n";
  write(dir.file("metrics.jsonl"), step(1, 2, 2.0) + huge + epoch(1, 500) + huge);
  write(dir.file("train.log"), std::string(kMaxLineBytes + 1, 'x') + "\n" + kLog);
  const RunFolder run = read_run_folder(dir.path());
  EXPECT_EQ(run.metrics.lines, 4);
  EXPECT_EQ(run.metrics.long_lines, 2);
  EXPECT_EQ(run.metrics.skipped, 0);  // counted apart from the lines that were read and were no record
  EXPECT_EQ(run.metrics.epochs.size(), 1u);
  EXPECT_EQ(run.metrics.steps.size(), 1u);
  EXPECT_EQ(run.log_long_lines, 1);
  EXPECT_EQ(run.value("model"), "resnet50");  // the start table after the long line is read
}

TEST(Records, WhatIsThereButCannotBeReadIsNamedNotTakenForMissing) {
  rn50::testing::TempDir dir;
  ASSERT_EQ(::mkfifo(dir.file("metrics.jsonl").c_str(), 0600), 0);
  try {
    read_run_folder(dir.path());
    FAIL() << "no error";
  } catch (const DataError& e) {
    EXPECT_EQ(std::string(e.what()), "cannot read " + dir.file("metrics.jsonl") + ": not a regular file");
  }
  ASSERT_EQ(::unlink(dir.file("metrics.jsonl").c_str()), 0);
  write(dir.file("metrics.jsonl"), epoch(1, 90));
  ASSERT_EQ(::mkfifo(dir.file("train.log").c_str(), 0600), 0);  // optional files: noted, and the rest read
  ASSERT_EQ(::mkdir(dir.file("run.json").c_str(), 0755), 0);
  const RunFolder run = read_run_folder(dir.path());
  EXPECT_EQ(run.unread, (std::vector<std::string>{"cannot read " + dir.file("train.log") + ": not a regular file",
                                                  "cannot read " + dir.file("run.json") + ": not a regular file"}));
  EXPECT_EQ(run.metrics.epochs.size(), 1u);
  ASSERT_EQ(::symlink("loop", dir.file("loop").c_str()), 0);
  try {
    read_run_folder(dir.file("loop"));
    FAIL() << "no error";
  } catch (const DataError& e) {
    EXPECT_EQ(std::string(e.what()), "cannot read " + dir.file("loop") + ": Too many levels of symbolic links");
  }
  EXPECT_THROW(read_run_folder(dir.file("none")), DataError);
}

// run.json's rows name each finding in parentheses: a name too short to hold them is skipped (an empty one once
// threw basic_string::substr's out_of_range out of rn50 report and rn50 compare).
TEST(Records, AFindingWithoutANameIsSkipped) {
  rn50::testing::TempDir dir;
  write(dir.file("metrics.jsonl"), epoch(1, 90));
  write(dir.file("run.json"), R"j({"found":[["",1],["x",2],["(classes)","4"]]})j");
  const RunFolder run = read_run_folder(dir.path());
  EXPECT_EQ(run.found("classes"), "4");
  EXPECT_EQ(run.machine.size(), 1u);
}

TEST(Records, ListsAndObjectsInRunJsonAreNotPrinted) {
  rn50::testing::TempDir dir;
  write(dir.file("metrics.jsonl"), epoch(1, 90));
  // Printing nested lists recurses once a level: 100,000 of them overflowed the stack.
  write(dir.file("run.json"), "{\"host\":" + std::string(100000, '[') + std::string(100000, ']') + ",\"cpu\":{}}");
  const RunFolder run = read_run_folder(dir.path());
  EXPECT_EQ(run.found("host"), "(a list)");
  EXPECT_EQ(run.found("cpu"), "(an object)");
}

TEST(Records, MedianOfEvenAndOddCounts) {
  EXPECT_EQ(median({3, 1, 2}), 2.0);
  EXPECT_EQ(median({4, 1, 2, 3}), 2.5);
  EXPECT_EQ(median({}), std::nullopt);
}

}  // namespace
}  // namespace rn50::report
