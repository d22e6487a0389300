// tests/core/test_crash_report.cpp: a fatal signal prints "rn50: <signal>; the stack:" and frames on standard error,
// then the process dies of that signal, as it would without the handler (gtest death tests: a child process each).
#include "core/crash_report.h"

#include <gtest/gtest.h>
#include <signal.h>

namespace rn50 {
namespace {

TEST(CrashReportDeathTest, AFatalSignalPrintsTheStackAndStillKillsTheProcess) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        print_stack_on_fatal_signals();
        print_stack_on_fatal_signals();  // twice: still one handler
        raise(SIGSEGV);
      },
      ::testing::KilledBySignal(SIGSEGV), "rn50: SIGSEGV; the stack:\n.*");
  EXPECT_EXIT(
      {
        print_stack_on_fatal_signals();
        abort();
      },
      ::testing::KilledBySignal(SIGABRT), "rn50: SIGABRT; the stack:");
}

}  // namespace
}  // namespace rn50
