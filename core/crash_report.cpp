// core/crash_report.cpp: the fatal-signal handlers: only async-signal-safe calls (write, backtrace_symbols_fd, raise)
// inside them.
#include "core/crash_report.h"

#include <execinfo.h>
#include <signal.h>
#include <unistd.h>

#include <cstring>
#include <initializer_list>

namespace rn50 {
namespace {

void write_text(const char* text) {
  const ssize_t ignored = write(STDERR_FILENO, text, std::strlen(text));
  (void)ignored;
}

void print_stack_and_die(int signal_number) {
  const char* name = signal_number == SIGSEGV   ? "SIGSEGV"
                     : signal_number == SIGBUS  ? "SIGBUS"
                     : signal_number == SIGILL  ? "SIGILL"
                     : signal_number == SIGFPE  ? "SIGFPE"
                     : signal_number == SIGABRT ? "SIGABRT"
                                                : "a fatal signal";
  write_text("rn50: ");
  write_text(name);
  write_text("; the stack:\n");
  void* frames[64];
  const int n = backtrace(frames, 64);
  backtrace_symbols_fd(frames, n, STDERR_FILENO);
  raise(signal_number);  // SA_RESETHAND restored the default action
}

}  // namespace

void print_stack_on_fatal_signals() {
  static const bool installed = [] {
    // backtrace() loads libgcc on its first call, which allocates: done here, not first inside the handler.
    void* warm[1];
    backtrace(warm, 1);
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
  (void)installed;
}

}  // namespace rn50
