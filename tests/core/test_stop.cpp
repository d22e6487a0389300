// tests/core/test_stop.cpp: the stop handlers with real signals, in a child process each (a death test): the first
// signal only asks, a second ends the process with 128 + the signal and removes the temporary of the write under way,
// and a finished write leaves nothing for it to remove.
#include "core/stop.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <vector>

#include "core/files.h"
#include "tests/support/files.h"
#include "tests/support/temp_dir.h"

namespace rn50 {
namespace {

using rn50::testing::TempDir;

// In the child: a checkpoint's temporary being written, then SIGTERM twice. Exits 1 or 2 where the first signal did
// more than ask.
void two_signals_during_a_write(const std::string& temporary) {
  stop::install_handlers();
  rn50::testing::write_file(temporary, std::vector<uint8_t>(1 << 20, 7));
  stop::set_pending_temporary(temporary);
  ::raise(SIGTERM);
  if (stop::requested() != SIGTERM) std::_Exit(1);
  if (!rn50::testing::file_exists(temporary)) std::_Exit(2);
  ::raise(SIGTERM);
  std::_Exit(3);  // not reached: the second signal ends the process
}

TEST(StopDeathTest, TheFirstSignalAsksTheSecondEndsAndRemovesTheTemporary) {
  TempDir dir;
  const std::string temporary = dir.file("checkpoint.safetensors.tmp");
  EXPECT_EXIT(two_signals_during_a_write(temporary), ::testing::ExitedWithCode(143),
              "rn50: second signal: stopping at once");
  EXPECT_FALSE(rn50::testing::file_exists(temporary));
}

// Ctrl-C: 130; with no write under way there is nothing to remove.
TEST(StopDeathTest, TwoSigintsEndWith130) {
  EXPECT_EXIT(
      {
        stop::install_handlers();
        stop::set_pending_temporary("");
        ::raise(SIGINT);
        if (stop::requested() != SIGINT) std::_Exit(1);
        ::raise(SIGINT);
        std::_Exit(3);
      },
      ::testing::ExitedWithCode(130), "second signal");
}

// write_atomically names its temporary only while it writes: a file of that name made after the write is not the
// second signal's to remove.
TEST(StopDeathTest, AFinishedWriteLeavesNoTemporaryForTheHandler) {
  TempDir dir;
  const std::string path = dir.file("metrics.jsonl");
  EXPECT_EXIT(
      {
        stop::install_handlers();
        files::write_atomically(path, std::vector<uint8_t>{1, 2, 3});
        rn50::testing::write_file(files::temporary_path(path), {4});
        ::raise(SIGTERM);
        ::raise(SIGTERM);
        std::_Exit(3);
      },
      ::testing::ExitedWithCode(143), "second signal");
  EXPECT_TRUE(rn50::testing::file_exists(files::temporary_path(path)));
  EXPECT_EQ(rn50::testing::read_file(path), (std::vector<uint8_t>{1, 2, 3}));
}

// Rank 0 says at once that the run is stopping (a CPU run's steps take minutes, and a silent one got a second
// Ctrl-C, which stops without the step's checkpoint).
TEST(StopDeathTest, AnAnnouncingProcessSaysTheFirstSignalWasHeard) {
  EXPECT_EXIT(
      {
        stop::install_handlers(/*announce=*/true);
        ::raise(SIGINT);
        if (stop::requested() != SIGINT) std::_Exit(1);
        std::_Exit(4);
      },
      ::testing::ExitedWithCode(4),
      "rn50: stopping after the step under way, then checkpointing \\(a second signal stops at once\\)");
}

// export and infer check no flag: their first signal ends the process and removes the temporary under way (a
// stopped export left a 107 MB half-written OUT.tmp).
TEST(StopDeathTest, UnderExitHandlersTheFirstSignalEndsAndRemovesTheTemporary) {
  TempDir dir;
  const std::string temporary = dir.file("weights.safetensors.tmp");
  EXPECT_EXIT(
      {
        stop::install_exit_handlers();
        rn50::testing::write_file(temporary, std::vector<uint8_t>(1 << 20, 7));
        stop::set_pending_temporary(temporary);
        ::raise(SIGTERM);
        std::_Exit(3);
      },
      ::testing::ExitedWithCode(143), "rn50: stopped by a signal; nothing half-written is left");
  EXPECT_FALSE(rn50::testing::file_exists(temporary));
}

}  // namespace
}  // namespace rn50
