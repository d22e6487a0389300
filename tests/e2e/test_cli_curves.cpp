// tests/e2e/test_cli_curves.cpp: the curves a run leaves while it runs, as a user meets them: TensorBoard's event
// files and summary.csv hold the metrics file's figures (read against the format by tests/support/event_reader.h),
// a resumed run adds a file of its own and keeps both the metrics file's (after a kill too), a fresh run in the same
// folder starts them anew, and report.html is rewritten after every epoch, not only at the end.
#include <algorithm>
#include <csignal>
#include <map>
#include <sstream>

#include "tests/e2e/cli.h"
#include "tests/support/event_reader.h"

namespace rn50::e2e {
namespace {

std::vector<std::string> event_files(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.path().filename().string().find("tfevents") != std::string::npos) out.push_back(entry.path().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

// tag -> its (step, value) points, over every event file of the folder.
std::map<std::string, std::vector<std::pair<int64_t, float>>> curves(const std::string& dir) {
  std::map<std::string, std::vector<std::pair<int64_t, float>>> out;
  for (const auto& file : event_files(dir)) {
    const testing::EventFileRead read = testing::read_events(file);
    EXPECT_EQ(read.error, "") << file;
    EXPECT_FALSE(read.events.empty()) << file;
    if (!read.events.empty()) {
      EXPECT_EQ(read.events[0].file_version, "brain.Event:2") << file;
    }
    for (const auto& e : read.events) {
      for (const auto& [tag, value] : e.values) out[tag].emplace_back(e.step, value);
    }
  }
  return out;
}

// summary.csv's rows below its header, each cell as text.
std::vector<std::vector<std::string>> csv_rows(const std::string& path, std::string* header) {
  std::ifstream in(path);
  std::vector<std::vector<std::string>> rows;
  std::getline(in, *header);
  for (std::string line; std::getline(in, line);) {
    std::vector<std::string> cells;
    std::istringstream cells_in(line);
    for (std::string cell; std::getline(cells_in, cell, ',');) cells.push_back(cell);
    if (!line.empty() && line.back() == ',') cells.emplace_back();
    rows.push_back(cells);
  }
  return rows;
}

// A cell of summary.csv is the record's number (times `scale`), or empty where the record has null.
void expect_cell(const std::string& cell, const nlohmann::json& value, double scale, const std::string& what) {
  if (value.is_null()) {
    EXPECT_EQ(cell, "") << what;
  } else if (scale == 1) {
    EXPECT_EQ(std::stod(cell), value.get<double>()) << what;
  } else {
    EXPECT_NEAR(std::stod(cell), scale * value.get<double>(), 1e-9) << what;
  }
}

// summary.csv holds a row per epoch record of metrics.jsonl, with the record's numbers.
void expect_summary_is_the_metrics(const std::string& run) {
  std::string header;
  const auto rows = csv_rows(run + "/summary.csv", &header);
  EXPECT_EQ(header, "epoch,train_loss,eval_loss,eval_top1,eval_top5,lr,images_per_s,wall_s,data_wait_s");
  const auto epochs = records(run + "/metrics.jsonl", "epoch");
  ASSERT_EQ(rows.size(), epochs.size());
  const std::vector<std::pair<const char*, double>> keys = {{"epoch", 1},        {"train_loss", 1}, {"val_loss", 1},
                                                            {"top1", 100},       {"top5", 100},     {"lr", 1},
                                                            {"images_per_s", 1}, {"wall_s", 1},     {"data_wait_s", 1}};
  for (size_t i = 0; i < rows.size(); ++i) {
    ASSERT_EQ(rows[i].size(), keys.size()) << i;
    for (size_t k = 0; k < keys.size(); ++k) {
      expect_cell(rows[i][k], epochs[i][keys[k].first], keys[k].second,
                  "row " + std::to_string(i + 1) + " " + keys[k].first);
    }
  }
}

// Every step and epoch record of metrics.jsonl is in the event files, once, at its step (epoch records at their
// epoch), as a float.
void expect_events_are_the_metrics(const std::string& run) {
  const auto c = curves(run);
  std::vector<std::pair<int64_t, float>> loss, rate, train_loss, top1;
  for (const auto& s : records(run + "/metrics.jsonl", "step")) {
    loss.emplace_back(s["step"].get<int64_t>(), s["loss"].get<float>());
    rate.emplace_back(s["step"].get<int64_t>(), s["images_per_s"].get<float>());
  }
  for (const auto& e : records(run + "/metrics.jsonl", "epoch")) {
    train_loss.emplace_back(e["epoch"].get<int64_t>(), e["train_loss"].get<float>());
    top1.emplace_back(e["epoch"].get<int64_t>(), static_cast<float>(100 * e["top1"].get<double>()));
  }
  ASSERT_FALSE(loss.empty());
  EXPECT_EQ(c.count("train/loss") ? c.at("train/loss") : decltype(loss){}, loss);
  EXPECT_EQ(c.count("train/images_per_s") ? c.at("train/images_per_s") : decltype(rate){}, rate);
  EXPECT_EQ(c.count("epoch/train_loss") ? c.at("epoch/train_loss") : decltype(loss){}, train_loss);
  EXPECT_EQ(c.count("epoch/top1") ? c.at("epoch/top1") : decltype(loss){}, top1);
  for (const char* tag : {"train/lr", "epoch/val_loss", "epoch/top5", "epoch/lr", "epoch/images_per_s",
                          "epoch/data_wait_s", "epoch/wall_s"}) {
    EXPECT_TRUE(c.count(tag)) << tag;
  }
  EXPECT_FALSE(c.count("train/gpu_util_pct"));  // null on the CPU: left out, never drawn as 0
}

// A small run with validation: 2 epochs of 6 steps, a step record every 2 steps.
std::string curves_run(const std::string& data, const std::string& out) {
  return small_run(data, out) +
         " --model resnet18 --image-size 32 --val-resize 32 --batch-size 4 --workers 1 --epochs 2 --log-every 2";
}

TEST_F(Cli, TheEventFilesAndSummaryCsvAreTheMetricsFileAlsoAfterAResume) {
  make_sample("--classes 3 --per-class 8 --val-per-class 2 --size 32");
  const std::string run = path("run");
  const Result r = rn50(curves_run(path("data"), run));
  ASSERT_EQ(r.code, 0) << r.output;
  ASSERT_EQ(event_files(run).size(), 1u);
  expect_events_are_the_metrics(run);
  expect_summary_is_the_metrics(run);

  // A third epoch by --resume: a new event file beside the first; the curves are still the metrics file's.
  const std::string first = event_files(run)[0];
  const Result resumed = rn50("train --resume " + run + " --epochs 3 --resume-override");
  ASSERT_EQ(resumed.code, 0) << resumed.output;
  ASSERT_EQ(event_files(run).size(), 2u);
  EXPECT_EQ(event_files(run)[0], first);
  ASSERT_EQ(records(run + "/metrics.jsonl", "epoch").size(), 3u);
  expect_events_are_the_metrics(run);
  expect_summary_is_the_metrics(run);

  // A fresh run into the same folder: the earlier run's curves go (its figures stay in metrics.jsonl).
  const Result again = rn50(curves_run(path("data"), run) + " --epochs 1 --overwrite");
  ASSERT_EQ(again.code, 0) << again.output;
  EXPECT_NE(again.output.find("removed 2 event files of an earlier run"), std::string::npos) << again.output;
  ASSERT_EQ(event_files(run).size(), 1u);
  std::string header;
  EXPECT_EQ(csv_rows(run + "/summary.csv", &header).size(), 1u);
  EXPECT_EQ(curves(run).at("epoch/train_loss").size(), 1u);
}

// A run killed in its second epoch (past the records, before a checkpoint) and resumed: the metrics file drops the
// lost steps' records and the event files their points, so that each step is drawn once, as it was resumed.
TEST_F(Cli, AResumeAfterAKillDropsTheLostStepsFromTheCurvesAsFromTheMetrics) {
  make_sample("--classes 3 --per-class 40 --val-per-class 2 --size 32");
  const std::string run = path("run"), log = path("run.log");
  const std::string args = small_run(path("data"), run) +
                           " --model resnet18 --image-size 32 --val-resize 32 --batch-size 4 --workers 1"
                           " --epochs 2 --log-every 1 --validate=off";
  const pid_t pid = start_shell(std::string(RN50_BINARY) + " " + args + " > " + log + " 2>&1");
  ASSERT_TRUE(wait_for_text(run + "/metrics.jsonl", "\"step\":35,", 180)) << read_text(log);
  ::kill(pid, SIGKILL);
  ::waitpid(pid, nullptr, 0);
  const auto before = curves(run);
  ASSERT_GE(before.at("train/loss").size(), 35u);  // the interrupted run's points past its checkpoint at step 30
  const Result resumed = rn50("train --resume " + run);
  ASSERT_EQ(resumed.code, 0) << resumed.output;
  EXPECT_NE(resumed.output.find("points past the resumed checkpoint"), std::string::npos) << resumed.output;
  const auto after = curves(run);
  std::vector<int64_t> steps;
  for (const auto& [step, value] : after.at("train/loss")) steps.push_back(step);
  std::vector<int64_t> each(60);
  for (int64_t s = 0; s < 60; ++s) each[s] = s + 1;
  EXPECT_EQ(steps, each);
  EXPECT_EQ(after.at("epoch/train_loss").size(), 2u);
  expect_summary_is_the_metrics(run);
}

// The epoch records in a report page's embedded data (its rn50-data JSON); -1 where the page has none.
int page_epochs(const std::string& page) {
  const std::string open = "<script type=\"application/json\" id=\"rn50-data\">";
  const size_t at = page.find(open);
  const size_t end = page.find("</script>", at);
  if (at == std::string::npos || end == std::string::npos) return -1;
  const nlohmann::json data =
      nlohmann::json::parse(page.substr(at + open.size(), end - at - open.size()), nullptr, false);
  return data.is_object() && data.contains("epochs") ? static_cast<int>(data["epochs"].size()) : -1;
}

// Waits up to `seconds` for the page to hold `epochs` epochs or more; returns how many it held last.
int wait_for_page(const std::string& page, int epochs, int seconds) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  int held = -1;
  while ((held = page_epochs(read_text(page))) < epochs && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return held;
}

// The page while the run runs: after epoch 1 it holds epoch 1 while the run trains on, after epoch 2 epoch 2; a run
// killed in epoch 3 (no end, so no report at its end) leaves the page of its 2 epochs.
TEST_F(Cli, TheReportIsRewrittenAfterEveryEpochWhileTheRunGoesOn) {
  make_sample("--classes 3 --per-class 40 --val-per-class 2 --size 32");
  const std::string run = path("run"), log = path("run.log");
  const pid_t pid = start_shell(std::string(RN50_BINARY) + " " + small_run(path("data"), run) +
                                " --model resnet18 --image-size 32 --val-resize 32 --batch-size 4 --workers 1"
                                " --epochs 3 --log-every 1 --validate=off --checkpoint=off > " +
                                log + " 2>&1");
  EXPECT_EQ(wait_for_page(run + "/report.html", 1, 180), 1) << read_text(log);
  EXPECT_EQ(::waitpid(pid, nullptr, WNOHANG), 0) << "the run ended before its second epoch";
  EXPECT_LT(records(run + "/metrics.jsonl", "epoch").size(), 2u);
  std::string header;
  EXPECT_EQ(csv_rows(run + "/summary.csv", &header).size(), 1u);
  EXPECT_EQ(wait_for_page(run + "/report.html", 2, 180), 2) << read_text(log);
  EXPECT_EQ(::waitpid(pid, nullptr, WNOHANG), 0) << "the run ended before its third epoch";
  ::kill(pid, SIGKILL);
  ::waitpid(pid, nullptr, 0);
  EXPECT_EQ(page_epochs(read_text(run + "/report.html")), 2);
  EXPECT_EQ(records(run + "/metrics.jsonl", "epoch").size(), 2u);
  EXPECT_EQ(curves(run).at("epoch/train_loss").size(), 2u);
}

}  // namespace
}  // namespace rn50::e2e
