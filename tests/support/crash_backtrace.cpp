// tests/support/crash_backtrace.cpp: prints the stack on a fatal signal (SIGSEGV, SIGBUS, SIGILL, SIGFPE,
// SIGABRT), so that a test binary crashing on the GPU machine (no debugger there) names the place; then the
// signal's default action, for the same exit status.
#include <execinfo.h>
#include <signal.h>
#include <unistd.h>

#include <initializer_list>

namespace {

void print_stack_and_die(int signal_number) {
  void* frames[64];
  const int n = backtrace(frames, 64);
  backtrace_symbols_fd(frames, n, STDERR_FILENO);
  raise(signal_number);  // SA_RESETHAND restored the default action
}

const bool installed = [] {
  // backtrace() loads libgcc on its first call, which allocates: done here, not first inside the handler.
  void* warm[1];
  backtrace(warm, 1);
  // Its own stack, so that a stack overflow is reported too.
  static char alternate_stack[1 << 16];
  stack_t stack{};
  stack.ss_sp = alternate_stack;
  stack.ss_size = sizeof alternate_stack;
  sigaltstack(&stack, nullptr);
  struct sigaction action {};
  action.sa_handler = print_stack_and_die;
  action.sa_flags = SA_ONSTACK | SA_RESETHAND;
  sigemptyset(&action.sa_mask);
  for (int fatal : {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT}) sigaction(fatal, &action, nullptr);
  return true;
}();

}  // namespace
