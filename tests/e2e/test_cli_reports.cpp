// tests/e2e/test_cli_reports.cpp: the reports as a user meets them: report.html and run.json at the end of rn50 train
// (report: off leaves them out), the rn50 version run.json names as --version does, the live progress line on a
// terminal and never in a pipe, and rn50 report and rn50 compare refusing what they cannot read with one line.
#include <pty.h>

#include <map>
#include <regex>
#include <sstream>

#include <sys/stat.h>

#include "tests/e2e/cli.h"

namespace rn50::e2e {
namespace {

// A tiny synthetic CPU run: 3 epochs of 3 steps.
std::string tiny_run(const std::string& out) {
  return "train --data synthetic --device cpu --model resnet18 --image-size 32 --val-resize 32 --batch-size 4"
         " --synthetic-images 12 --epochs 3 --validate=off --checkpoint=off --log-every 2 --out-dir " +
         out;
}

// Runs `args` with standard output and error on a pseudo-terminal, as in an interactive shell; returns what it showed.
std::string on_terminal(const std::string& args) {
  int master = -1;
  const pid_t pid = ::forkpty(&master, nullptr, nullptr, nullptr);
  if (pid == 0) {
    const std::string command = std::string(RN50_BINARY) + " " + args;
    ::execl("/bin/sh", "sh", "-c", command.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  std::string shown;
  if (pid < 0) return shown;
  std::array<char, 4096> buffer{};
  for (ssize_t n; (n = ::read(master, buffer.data(), buffer.size())) > 0;) shown.append(buffer.data(), n);
  ::close(master);
  int status = 0;
  ::waitpid(pid, &status, 0);
  return shown;
}

TEST_F(Cli, TrainingWritesItsReportAndMachineUnlessReportIsOff) {
  Result r = rn50(tiny_run(path("run")));
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_TRUE(fs::exists(path("run") + "/report.html"));
  EXPECT_NE(r.output.find("report: " + path("run") + "/report.html"), std::string::npos) << r.output;
  std::ifstream run_json(path("run") + "/run.json");
  const nlohmann::json machine = nlohmann::json::parse(run_json);
  EXPECT_EQ(machine["world_size"], 1);
  EXPECT_GE(machine["usable_cores"].get<int>(), 1);
  EXPECT_GE(machine["host_cores"].get<int>(), machine["usable_cores"].get<int>());
  // The host's 1-, 5- and 15-minute load averages before the run trained, for rn50 compare's warning.
  ASSERT_TRUE(machine["load_average"].is_array()) << machine;
  ASSERT_EQ(machine["load_average"].size(), 3u);
  for (const auto& load : machine["load_average"]) EXPECT_GE(load.get<double>(), 0.0);
  std::map<std::string, std::string> found;
  for (const auto& row : machine["found"]) found[row[0].get<std::string>()] = row[1].get<std::string>();
  EXPECT_EQ(found["(device)"], "cpu");
  // The run names the rn50 that made it, as `rn50 --version` does: its version and source revision.
  const Result version = rn50("--version");
  ASSERT_EQ(version.code, 0) << version.output;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(version.output, m, std::regex("version +([0-9]+\\.[0-9]+\\.[0-9]+)\n")))
      << version.output;
  const std::string number = m[1];
  ASSERT_TRUE(std::regex_search(version.output, m, std::regex("revision +([0-9a-f]{12}(\\+changes)?|unknown)\n")))
      << version.output;
  const std::string revision = m[1];
  EXPECT_NE(version.output.find("LibTorch "), std::string::npos) << version.output;
  EXPECT_EQ(found["(rn50)"].rfind("rn50 " + number + " (" + revision + ")", 0), 0u) << found["(rn50)"];
  // In a pipe (as here) the progress is the step log lines only, never a line drawn over itself.
  EXPECT_EQ(r.output.find('\r'), std::string::npos);
  EXPECT_NE(r.output.find("epoch 2 step 4 (1/3) loss "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find(" left in the epoch, "), std::string::npos) << r.output;
  // Step records carry the interval's utilisation: unavailable (null) on the CPU.
  const auto steps = records(path("run") + "/metrics.jsonl", "step");
  ASSERT_FALSE(steps.empty());
  EXPECT_TRUE(steps[0].contains("gpu_util_pct") && steps[0]["gpu_util_pct"].is_null()) << steps[0];

  r = rn50(tiny_run(path("quiet")) + " --report=off");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_FALSE(fs::exists(path("quiet") + "/report.html"));
}

TEST_F(Cli, OnATerminalEachEpochHasALiveProgressLine) {
  const std::string shown = on_terminal(tiny_run(path("run")));
  EXPECT_NE(shown.find("\r\x1b[Kepoch 1/3: 1/3 steps (33.3%), "), std::string::npos) << shown;
  EXPECT_NE(shown.find("3/3 steps (100.0%)"), std::string::npos) << shown;
  EXPECT_NE(shown.find("epoch 3/3: "), std::string::npos) << shown;
  EXPECT_TRUE(fs::exists(path("run") + "/report.html"));
}

// What docs/training.md and `rn50 train --help` say of a pipe: the log is on standard error, so `rn50 train ... 2>&1 |
// tee log` captures every line of train.log (the start-up table, the step and epoch lines, the summary), while standard
// output, with no terminal to draw the progress line on, carries nothing.
TEST_F(Cli, ThroughTeeTheConsoleIsTheLogAsTheDocsSay) {
  const std::string rn50_binary = RN50_BINARY;
  const std::string both = path("both.log"), out = path("stdout.log");
  ASSERT_EQ(
      std::system(
          ("sh -c '" + rn50_binary + " " + tiny_run(path("run")) + " 2>&1 | tee " + both + " > /dev/null'").c_str()),
      0);
  ASSERT_EQ(std::system(("sh -c '" + rn50_binary + " " + tiny_run(path("run2")) + " 2> /dev/null | tee " + out +
                         " > /dev/null'")
                            .c_str()),
            0);
  const std::string captured = read_text(both), log = read_text(path("run") + "/train.log");
  std::istringstream lines(log);
  int count = 0;
  for (std::string line; std::getline(lines, line); ++count) {
    EXPECT_NE(captured.find(line + "\n"), std::string::npos) << line;
  }
  EXPECT_GT(count, 20);
  for (const char* part : {"] [info] rn50 train", "epoch 3 step 8 (2/3) loss ",
                           "] [info] epoch 3/3: ", "] [info] finished: 3 epochs in "}) {
    EXPECT_NE(captured.find(part), std::string::npos) << part << "\n" << captured;
  }
  EXPECT_EQ(read_text(out), "");
}

TEST_F(Cli, ReportAndCompareRefuseWhatTheyCannotReadWithOneLine) {
  fs::create_directories(path("empty"));
  expect_exit_2_naming("report " + path("empty"), path("empty") +
                                                      ": no metrics.jsonl (not the out_dir of an rn50 "
                                                      "train run)");
  expect_exit_2_naming("report", "rn50 report needs one RUN_DIR");
  // What is there but cannot be read is named as such, not taken for missing.
  ASSERT_EQ(::mkfifo((path("empty") + "/metrics.jsonl").c_str(), 0600), 0);
  expect_exit_2_naming("report " + path("empty"),
                       "cannot read " + path("empty") + "/metrics.jsonl: not a regular file");
  fs::create_symlink("loop", path("loop"));
  expect_exit_2_naming("report " + path("loop"), "cannot read " + path("loop") + ": Too many levels of symbolic links");
  expect_exit_2_naming("compare " + path("loop"),
                       "cannot read " + path("loop") + ": Too many levels of symbolic links");
  ASSERT_EQ(rn50(tiny_run(path("a"))).code, 0);
  ASSERT_EQ(rn50(tiny_run(path("b")) + " --model resnet34").code, 0);
  expect_exit_2_naming("compare " + path("a") + " " + path("b"), "rows differ in model: resnet18 (");
  expect_exit_2_naming("compare " + path("a") + " --price A100=3", "price for 'A100': no machine of that name");
  expect_exit_2_naming("compare " + path("a") + " --price CPU=cheap",
                       "--price CPU=cheap: 'cheap' is not a positive price");

  // A torn last line (a run killed mid-write) is skipped and counted; the page is still written.
  std::ofstream(path("a") + "/metrics.jsonl", std::ios::app) << "{\"type\":\"epoch\",\"epo";
  const Result r = rn50("report " + path("a") + " --out " + path("a.html"));
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("wrote " + path("a.html") + " (3 epochs, 4 step records, 1 lines skipped)"),
            std::string::npos)
      << r.output;
  const Result both = rn50("compare " + path("a") + " " + path("a") + "/../a --price CPU=0.5 --out " + path("cmp"));
  EXPECT_EQ(both.code, 2) << both.output;  // the same run twice
  const Result one = rn50("compare " + path("a") + " --price CPU=0.5 --out " + path("cmp"));
  ASSERT_EQ(one.code, 0) << one.output;
  for (const char* name : {"compare.md", "compare.json", "throughput.svg", "utilisation.svg", "cost.svg"}) {
    EXPECT_TRUE(fs::exists(path("cmp") + "/" + name)) << name;
  }
}

}  // namespace
}  // namespace rn50::e2e
