// tests/support/crash_backtrace.cpp: a test binary crashing on the GPU machine (no debugger there) prints its stack
// (core/crash_report.h), installed before main.
#include "core/crash_report.h"

namespace {

const bool installed = [] {
  rn50::print_stack_on_fatal_signals();
  return true;
}();

}  // namespace
