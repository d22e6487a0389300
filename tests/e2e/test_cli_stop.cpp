// tests/e2e/test_cli_stop.cpp: stopping `rn50 train` with real signals as users and schedulers do (Ctrl-C, SIGTERM
// from docker stop, scancel or a spot reclaim): mid-step, twice, during validation and with two ranks; and resuming
// from the run's folder, exactly where the run stopped.
#include <cmath>
#include <csignal>
#include <regex>

#include "tests/e2e/cli.h"

namespace rn50::e2e {
namespace {

// Waits for the process and returns its exit code (-1 when a signal killed it), with the seconds it took.
std::pair<int, double> wait_exit(pid_t pid) {
  const auto t0 = std::chrono::steady_clock::now();
  int status = 0;
  ::waitpid(pid, &status, 0);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, seconds};
}

// The temporaries a write left in a folder (files ending in .tmp).
std::vector<std::string> temporaries(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.path().extension() == ".tmp") out.push_back(entry.path().string());
  }
  return out;
}

// A run long enough to be stopped in: 30 steps an epoch of ResNet-18 at 32 px.
std::string long_run(const std::string& data, const std::string& out) {
  return small_run(data, out) +
         " --model resnet18 --image-size 32 --val-resize 32 --batch-size 4 --workers 1"
         " --epochs 2 --log-every 1 --seed 3 --validate=off";
}

// SIGTERM mid-epoch: the step under way ends, a checkpoint at that step, the stop's record, the report and one line
// naming the command that resumes; exit 143 within a cloud's grace period. `--resume RUN_DIR` then takes the run's
// own configuration and continues at the next step: every step's loss is the uninterrupted run's.
TEST_F(Cli, SigtermStopsAfterTheStepAndTheRunFolderResumesExactly) {
  make_sample("--classes 3 --per-class 40 --val-per-class 4 --size 32");
  const std::string run = path("run"), log = path("run.log");
  const pid_t pid = start_shell(std::string(RN50_BINARY) + " " + long_run(path("data"), run) + " > " + log + " 2>&1");
  ASSERT_TRUE(wait_for_text(run + "/metrics.jsonl", "\"step\":5,", 120)) << read_text(log);
  ::kill(pid, SIGTERM);
  const auto [code, seconds] = wait_exit(pid);
  EXPECT_EQ(code, 143) << read_text(log);
  EXPECT_LT(seconds, 30);
  const std::string output = read_text(log);
  EXPECT_NE(output.find("stopped by SIGTERM in epoch 1 after "), std::string::npos) << output;
  EXPECT_NE(output.find("resume with: rn50 train --resume " + run), std::string::npos) << output;
  EXPECT_TRUE(fs::exists(run + "/report.html"));
  EXPECT_TRUE(temporaries(run).empty());
  const auto stops = records(run + "/metrics.jsonl", "stop");
  ASSERT_EQ(stops.size(), 1u);
  const int64_t stopped_at = stops[0]["step"].get<int64_t>();
  EXPECT_GE(stopped_at, 5);
  EXPECT_LT(stopped_at, 30);  // within the first epoch
  EXPECT_EQ(stops[0]["epoch_step"].get<int64_t>(), stopped_at);
  EXPECT_EQ(stops[0]["signal"], "SIGTERM");

  const Result resumed = rn50("train --resume " + run);
  ASSERT_EQ(resumed.code, 0) << resumed.output;
  EXPECT_NE(resumed.output.find("in epoch 1 at its step " + std::to_string(stopped_at) + " of 30"), std::string::npos)
      << resumed.output;
  const Result whole = rn50(long_run(path("data"), path("whole")));
  ASSERT_EQ(whole.code, 0) << whole.output;
  const auto a = records(path("whole") + "/metrics.jsonl", "step"), b = records(run + "/metrics.jsonl", "step");
  ASSERT_EQ(a.size(), 60u);
  ASSERT_EQ(b.size(), 60u);
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i]["step"], b[i]["step"]);
    EXPECT_NEAR(a[i]["loss"].get<double>(), b[i]["loss"].get<double>(), 1e-5) << "step " << a[i]["step"];
  }
  EXPECT_EQ(records(run + "/metrics.jsonl", "epoch").size(), 2u);
  EXPECT_EQ(records(run + "/metrics.jsonl", "stop").size(), 1u);  // the stop stays in the run's history
  // A key that would make it another run is refused, naming it; --resume-override takes it.
  expect_exit_2_naming("train --resume " + run + " --epochs 3 --lr 0.2",
                       "config key 'resume': 'epochs' 3 (the run's 2), 'lr' 0.2 (the run's 0.1) would change the run");
  const Result longer = rn50("train --resume " + run + " --epochs 3 --resume-override");
  EXPECT_EQ(longer.code, 0) << longer.output;
  EXPECT_EQ(records(run + "/metrics.jsonl", "epoch").size(), 3u);
}

// Ctrl-C is SIGINT: the same stop, exit 130.
TEST_F(Cli, SigintStopsTheSameWayWithExit130) {
  make_sample("--classes 3 --per-class 40 --val-per-class 4 --size 32");
  const std::string run = path("run"), log = path("run.log");
  const pid_t pid = start_shell(std::string(RN50_BINARY) + " " + long_run(path("data"), run) + " > " + log + " 2>&1");
  ASSERT_TRUE(wait_for_text(run + "/metrics.jsonl", "\"step\":2,", 120)) << read_text(log);
  ::kill(pid, SIGINT);
  EXPECT_EQ(wait_exit(pid).first, 130) << read_text(log);
  const auto stops = records(run + "/metrics.jsonl", "stop");
  ASSERT_EQ(stops.size(), 1u);
  EXPECT_EQ(stops[0]["signal"], "SIGINT");
  EXPECT_TRUE(fs::exists(run + "/checkpoint.safetensors"));
}

// A second signal stops at once: signals every few milliseconds from the first on land in the step, the checkpoint's
// write or the report's; whichever, the process ends with 143 and leaves no temporary behind.
TEST_F(Cli, ASecondSignalStopsAtOnceAndLeavesNoTemporary) {
  make_sample("--classes 3 --per-class 40 --val-per-class 4 --size 32");
  const std::string run = path("run"), log = path("run.log");
  const pid_t pid = start_shell(std::string(RN50_BINARY) + " " + long_run(path("data"), run) + " > " + log + " 2>&1");
  ASSERT_TRUE(wait_for_text(run + "/metrics.jsonl", "\"step\":3,", 120)) << read_text(log);
  ::kill(pid, SIGTERM);
  std::this_thread::sleep_for(std::chrono::milliseconds(1));
  const auto t0 = std::chrono::steady_clock::now();
  int status = 0;
  while (::waitpid(pid, &status, WNOHANG) == 0) {
    ::kill(pid, SIGTERM);
    std::this_thread::sleep_for(std::chrono::milliseconds(3));
  }
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 10);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 143) << status << "\n" << read_text(log);
  EXPECT_TRUE(temporaries(run).empty());
}

// A stop during validation: the epoch's training is whole, so its checkpoint is the epoch's end (nothing of the
// epoch is redone), its record carries no validation figures, and the stop's record says the whole epoch ran.
TEST_F(Cli, AStopDuringValidationKeepsTheWholeEpoch) {
  make_sample("--classes 3 --per-class 4 --val-per-class 150 --size 64");
  const std::string run = path("run"), log = path("run.log");
  const pid_t pid = start_shell(std::string(RN50_BINARY) + " " + small_run(path("data"), run) +
                                " --model resnet18 --image-size 64 --val-resize 64 --batch-size 4 --workers 1"
                                " --epochs 2 --log-every 1 > " +
                                log + " 2>&1");
  // The epoch's third and last step recorded: validation follows.
  ASSERT_TRUE(wait_for_text(run + "/metrics.jsonl", "\"step\":3,", 120)) << read_text(log);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  ::kill(pid, SIGTERM);
  EXPECT_EQ(wait_exit(pid).first, 143) << read_text(log);
  EXPECT_NE(read_text(log).find("stopped by SIGTERM after epoch 1 (global step 3)"), std::string::npos)
      << read_text(log);
  const auto epochs = records(run + "/metrics.jsonl", "epoch");
  ASSERT_EQ(epochs.size(), 1u);
  EXPECT_TRUE(epochs[0]["top1"].is_null());
  EXPECT_EQ(epochs[0]["steps"], 3);
  const auto stops = records(run + "/metrics.jsonl", "stop");
  ASSERT_EQ(stops.size(), 1u);
  EXPECT_EQ(stops[0]["epoch_step"], 3);
  const Result resumed = rn50("train --resume " + run + " --validate=off");
  EXPECT_EQ(resumed.code, 0) << resumed.output;
  EXPECT_NE(resumed.output.find("after epoch 1 (step 3)"), std::string::npos) << resumed.output;
}

// Two ranks under rn50 launch: the signal to the launcher reaches each rank once, the ranks agree to stop after the
// same step (a multiple of their agreement interval) and exit 143, as does the launcher.
TEST_F(Cli, LaunchedRanksStopTogetherAfterOneStep) {
  make_sample("--classes 2 --per-class 60 --val-per-class 1 --size 32");
  const std::string run = path("run"), log = path("launch.log");
  const pid_t launcher =
      start_shell(std::string(RN50_BINARY) + " launch --nproc 2 -- " + small_run(path("data"), run) +
                  " --model resnet18 --image-size 32 --val-resize 32 --batch-size 2 --workers 1 --epochs 1000"
                  " --log-every 1 --validate=off > " +
                  log + " 2>&1");
  ASSERT_TRUE(wait_for_text(run + "/metrics.jsonl", "\"step\":3,", 180)) << read_text(log);
  ::kill(launcher, SIGTERM);
  const auto [code, seconds] = wait_exit(launcher);
  EXPECT_EQ(code, 143) << read_text(log);
  EXPECT_LT(seconds, 30);
  EXPECT_NE(read_text(log).find("stopped by SIGTERM in epoch 1 after "), std::string::npos) << read_text(log);
  EXPECT_EQ(read_text(log).find("stopping the other"), std::string::npos) << read_text(log);  // no rank failed
  const auto stops = records(run + "/metrics.jsonl", "stop");
  ASSERT_EQ(stops.size(), 1u);
  EXPECT_EQ(stops[0]["step"].get<int64_t>() % 20, 0) << stops[0];
  EXPECT_TRUE(fs::exists(run + "/checkpoint.safetensors"));
}

}  // namespace
}  // namespace rn50::e2e
