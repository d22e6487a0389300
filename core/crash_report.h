// core/crash_report.h: a stack trace on standard error when the process dies of a fatal signal (SIGSEGV, SIGBUS,
// SIGILL, SIGFPE, SIGABRT), so that a crash on a machine without a debugger names its place; the signal's default
// action follows, for the same exit status.
#pragma once

namespace rn50 {

// Installs the handlers (on a stack of their own, so that a stack overflow is reported too). Idempotent.
void print_stack_on_fatal_signals();

}  // namespace rn50
