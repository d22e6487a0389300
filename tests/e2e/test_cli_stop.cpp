// tests/e2e/test_cli_stop.cpp: stopping `rn50 train` with real signals as users and schedulers do (Ctrl-C, SIGTERM
// from docker stop, scancel or a spot reclaim): mid-step, twice, during validation and with two ranks; and resuming
// from the run's folder, exactly where the run stopped.
#include <poll.h>
#include <sys/inotify.h>

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

// The files created in a folder from the moment this is made (inotify: told the moment each is).
class CreationWatch {
 public:
  explicit CreationWatch(const std::string& dir) : fd_(::inotify_init1(IN_NONBLOCK | IN_CLOEXEC)) {
    if (fd_ >= 0 && ::inotify_add_watch(fd_, dir.c_str(), IN_CREATE) < 0) {
      ::close(fd_);
      fd_ = -1;
    }
  }
  ~CreationWatch() {
    if (fd_ >= 0) ::close(fd_);
  }
  CreationWatch(const CreationWatch&) = delete;
  CreationWatch& operator=(const CreationWatch&) = delete;

  // Waits up to `seconds` for a file named `name` to be created; false on time out.
  bool wait_for(const std::string& name, int seconds) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
    alignas(inotify_event) char buffer[4096];
    while (fd_ >= 0 && std::chrono::steady_clock::now() < deadline) {
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, 100) <= 0) continue;
      const ssize_t n = ::read(fd_, buffer, sizeof buffer);
      for (ssize_t at = 0; at < n;) {
        const auto* event = reinterpret_cast<const inotify_event*>(buffer + at);
        if (event->len > 0 && name == event->name) return true;
        at += static_cast<ssize_t>(sizeof(inotify_event) + event->len);
      }
    }
    return false;
  }

 private:
  int fd_;
};

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
  // Its epoch line says the figures are of the steps after the resume.
  EXPECT_NE(
      resumed.output.find("epoch 1/2 (resumed at step " + std::to_string(stopped_at) + ": its steps after that): "),
      std::string::npos)
      << resumed.output;
  // Resuming it again, finished, trains nothing and says how to train on (exit 0: a requeued job is no error).
  const Result finished = rn50("train --resume " + run);
  ASSERT_EQ(finished.code, 0) << finished.output;
  EXPECT_NE(finished.output.find("the run finished its 2 epochs already (epochs: 2): nothing to train; to train more, "
                                 "resume with --epochs N --resume-override"),
            std::string::npos)
      << finished.output;
  const Result whole = rn50(long_run(path("data"), path("whole")));
  ASSERT_EQ(whole.code, 0) << whole.output;
  const auto a = records(path("whole") + "/metrics.jsonl", "step"), b = records(run + "/metrics.jsonl", "step");
  ASSERT_EQ(a.size(), 60u);
  ASSERT_EQ(b.size(), 60u);
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i]["step"], b[i]["step"]);
    EXPECT_NEAR(a[i]["loss"].get<double>(), b[i]["loss"].get<double>(), 1e-5) << "step " << a[i]["step"];
  }
  const auto epochs = records(run + "/metrics.jsonl", "epoch");
  ASSERT_EQ(epochs.size(), 2u);
  // The resumed epoch's record says where it resumed: its steps and loss are of the steps after it only.
  EXPECT_EQ(epochs[0].value("resumed_at_step", int64_t{-1}), stopped_at) << epochs[0];
  EXPECT_EQ(epochs[0]["steps"].get<int64_t>(), 30 - stopped_at) << epochs[0];
  EXPECT_FALSE(epochs[1].contains("resumed_at_step")) << epochs[1];
  EXPECT_EQ(records(run + "/metrics.jsonl", "stop").size(), 1u);  // the stop stays in the run's history
  // A key that would make it another run is refused, naming it; --resume-override takes it.
  expect_exit_2_naming("train --resume " + run + " --epochs 3 --lr 0.2",
                       "config key 'resume': 'epochs' 3 (the run's 2), 'lr' 0.2 (the run's 0.1) would change the run");
  const Result longer = rn50("train --resume " + run + " --epochs 3 --resume-override");
  EXPECT_EQ(longer.code, 0) << longer.output;
  EXPECT_EQ(records(run + "/metrics.jsonl", "epoch").size(), 3u);
}

// Ctrl-C is SIGINT: the same stop, exit 130. The stop line quotes a folder the shell would split (it once printed
// "rn50 train --resume a run", which failed when pasted).
TEST_F(Cli, SigintStopsTheSameWayWithExit130) {
  make_sample("--classes 3 --per-class 40 --val-per-class 4 --size 32");
  const std::string run = path("a run"), log = path("run.log");
  const pid_t pid =
      start_shell(std::string(RN50_BINARY) + " " + long_run(path("data"), "'" + run + "'") + " > " + log + " 2>&1");
  ASSERT_TRUE(wait_for_text(run + "/metrics.jsonl", "\"step\":2,", 120)) << read_text(log);
  ::kill(pid, SIGINT);
  EXPECT_EQ(wait_exit(pid).first, 130) << read_text(log);
  EXPECT_NE(read_text(log).find("; resume with: rn50 train --resume '" + run + "'\n"), std::string::npos)
      << read_text(log);
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

// A signal that comes while the epoch's checkpoint is written (the moment its temporary appears) does not cut the
// write: the checkpoint is whole, the epoch's, no temporary is left, and the run stops there with 143 and its record
// and line. It once went on into the next epoch with a record of "signal 0" (and ended a last epoch with exit 0).
TEST_F(Cli, ASignalDuringTheCheckpointsWriteStopsAfterIt) {
  make_sample("--classes 3 --per-class 40 --val-per-class 4 --size 32");
  const std::string run = path("run"), log = path("run.log");
  const pid_t pid = start_shell(std::string(RN50_BINARY) + " " + long_run(path("data"), run) + " > " + log + " 2>&1");
  ASSERT_TRUE(wait_for_text(run + "/metrics.jsonl", "\"step\":1,", 120)) << read_text(log);
  CreationWatch watch(run);
  ASSERT_TRUE(watch.wait_for("checkpoint.safetensors.tmp", 120)) << read_text(log);
  ::kill(pid, SIGTERM);
  EXPECT_EQ(wait_exit(pid).first, 143) << read_text(log);
  EXPECT_NE(read_text(log).find("stopped by SIGTERM after epoch 1 (global step 30)"), std::string::npos)
      << read_text(log);
  EXPECT_TRUE(temporaries(run).empty());
  const auto stops = records(run + "/metrics.jsonl", "stop");
  ASSERT_EQ(stops.size(), 1u);
  EXPECT_EQ(stops[0]["signal"], "SIGTERM");
  EXPECT_EQ(stops[0]["step"], 30);
  EXPECT_EQ(records(run + "/metrics.jsonl", "epoch").size(), 1u);
  const Result resumed = rn50("train --resume " + run);
  EXPECT_EQ(resumed.code, 0) << resumed.output;
  EXPECT_NE(resumed.output.find("after epoch 1 (step 30)"), std::string::npos) << resumed.output;
}

// A second signal while the checkpoint of the first is written ends the process at once, and the half-written
// temporary goes with it: no .tmp, and no checkpoint (none was complete). ResNet-50: 200 MB to write, a window
// of a second or more here for the signal to land in.
TEST_F(Cli, ASecondSignalDuringTheCheckpointsWriteLeavesNoTemporary) {
  make_sample("--classes 3 --per-class 40 --val-per-class 4 --size 32");
  const std::string run = path("run"), log = path("run.log");
  const pid_t pid = start_shell(std::string(RN50_BINARY) + " " + long_run(path("data"), run) + " --model resnet50 > " +
                                log + " 2>&1");
  ASSERT_TRUE(wait_for_text(run + "/metrics.jsonl", "\"step\":2,", 180)) << read_text(log);
  CreationWatch watch(run);
  ::kill(pid, SIGTERM);  // the step under way ends, then its checkpoint is written
  ASSERT_TRUE(watch.wait_for("checkpoint.safetensors.tmp", 120)) << read_text(log);
  ::kill(pid, SIGTERM);
  EXPECT_EQ(wait_exit(pid).first, 143) << read_text(log);
  EXPECT_NE(read_text(log).find("rn50: second signal: stopping at once"), std::string::npos) << read_text(log);
  EXPECT_TRUE(temporaries(run).empty());
  EXPECT_FALSE(fs::exists(run + "/checkpoint.safetensors"));
}

// Two ranks of a long ResNet-18 run under rn50 launch, into `run` and `log`; returns the launcher's pid once rank 0
// has recorded three steps, -1 if it did not within 3 minutes.
pid_t launch_two_ranks(const std::string& data, const std::string& run, const std::string& log) {
  const pid_t launcher =
      start_shell(std::string(RN50_BINARY) + " launch --nproc 2 -- " + small_run(data, run) +
                  " --model resnet18 --image-size 32 --val-resize 32 --batch-size 2 --workers 1 --epochs 1000"
                  " --log-every 1 --validate=off --dist-timeout-s 60 > " +
                  log + " 2>&1");
  return wait_for_text(run + "/metrics.jsonl", "\"step\":3,", 180) ? launcher : -1;
}

// The launched ranks stopped together: after the same step (a multiple of their agreement interval), each with 143 by
// itself (no rank failed, none got a second signal), within a cloud's grace, with the checkpoint, the stop's record,
// the stop line and the report, and no temporary left.
void expect_ranks_stopped_together(pid_t launcher, const std::string& run, const std::string& log) {
  const auto [code, seconds] = wait_exit(launcher);
  const std::string output = read_text(log);
  EXPECT_EQ(code, 143) << output;
  EXPECT_LT(seconds, 30);
  EXPECT_NE(output.find("stopped by SIGTERM in epoch 1 after "), std::string::npos) << output;
  // With as many processes: the steps per epoch depend on them (rn50 train --resume alone once failed on that).
  EXPECT_NE(output.find("; resume with 2 processes: rn50 launch --nproc 2 -- train --resume " + run + " (or "),
            std::string::npos)
      << output;
  EXPECT_EQ(output.find("stopping the other"), std::string::npos) << output;
  EXPECT_EQ(output.find("second signal:"), std::string::npos) << output;
  const auto stops = records(run + "/metrics.jsonl", "stop");
  ASSERT_EQ(stops.size(), 1u);
  EXPECT_EQ(stops[0]["step"].get<int64_t>() % 20, 0) << stops[0];
  EXPECT_TRUE(fs::exists(run + "/checkpoint.safetensors"));
  EXPECT_TRUE(fs::exists(run + "/report.html"));
  EXPECT_TRUE(temporaries(run).empty());
}

// Two ranks under rn50 launch: the signal to the launcher reaches each rank once, and they stop together.
TEST_F(Cli, LaunchedRanksStopTogetherAfterOneStep) {
  make_sample("--classes 2 --per-class 60 --val-per-class 1 --size 32");
  const pid_t launcher = launch_two_ranks(path("data"), path("run"), path("launch.log"));
  ASSERT_GT(launcher, 0) << read_text(path("launch.log"));
  ::kill(launcher, SIGTERM);
  expect_ranks_stopped_together(launcher, path("run"), path("launch.log"));
  // Rank 0 alone says at once that it heard the signal: one line, not one a rank.
  const std::string output = read_text(path("launch.log"));
  const std::string heard = "rn50: stopping after the step under way, then checkpointing";
  EXPECT_NE(output.find(heard), std::string::npos) << output;
  EXPECT_EQ(output.find(heard, output.find(heard) + 1), std::string::npos) << output;
}

// A signal that reaches one rank alone (a `kill` of its process): the ranks still agree to stop after the same step,
// and the launcher, seeing a rank that exited 143 by itself, waits for the other instead of sending it a signal that
// would be its second (and end it at once, mid-checkpoint).
TEST_F(Cli, ASignalToOneRankStopsBothAtTheSameStep) {
  make_sample("--classes 2 --per-class 60 --val-per-class 1 --size 32");
  const pid_t launcher = launch_two_ranks(path("data"), path("run"), path("launch.log"));
  ASSERT_GT(launcher, 0) << read_text(path("launch.log"));
  std::ifstream children("/proc/" + std::to_string(launcher) + "/task/" + std::to_string(launcher) + "/children");
  pid_t rank0 = 0, rank1 = 0;
  children >> rank0 >> rank1;
  ASSERT_GT(rank1, 0);
  ::kill(rank1, SIGTERM);
  expect_ranks_stopped_together(launcher, path("run"), path("launch.log"));
}

}  // namespace
}  // namespace rn50::e2e
