// tests/support/crash_backtrace.cpp: prints the stack on SIGSEGV, so that a test binary crashing on the GPU
// machine (no debugger there) names the place; then the signal's default action (the same exit status).
#include <execinfo.h>
#include <signal.h>
#include <unistd.h>

namespace {

void print_stack_and_die(int signal_number) {
  void* frames[64];
  const int n = backtrace(frames, 64);
  backtrace_symbols_fd(frames, n, STDERR_FILENO);
  signal(signal_number, SIG_DFL);
  raise(signal_number);
}

const bool installed = [] {
  signal(SIGSEGV, print_stack_and_die);
  return true;
}();

}  // namespace
