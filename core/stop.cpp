// core/stop.cpp: the signal handlers, the request flag and the pending temporary, async-signal-safe.
#include "core/stop.h"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstring>

namespace rn50::stop {
namespace {

std::atomic<int> g_requested{0};
// A fixed buffer: the handler may read it at any moment, so it is never reallocated; a path longer than it is not
// recorded (the cleanup is best effort, the run's own check removes stale temporaries at the next start).
char g_pending[4096] = {0};
std::atomic<bool> g_installed{false};

// install_exit_handlers: the first signal stops the process.
std::atomic<bool> g_exit_at_once{false};
std::atomic<bool> g_announce{false};  // install_handlers(announce)

void on_signal(int sig) {
  if (g_exit_at_once.load()) {
    if (g_pending[0] != '\0') ::unlink(g_pending);
    static const char message[] = "rn50: stopped by a signal; nothing half-written is left\n";
    const ssize_t ignored = ::write(STDERR_FILENO, message, sizeof message - 1);
    (void)ignored;
    ::_exit(128 + sig);
  }
  int expected = 0;
  if (g_requested.compare_exchange_strong(expected, sig)) {  // the first: a request
    if (g_announce.load()) {
      static const char message[] =
          "rn50: stopping after the step under way, then checkpointing (a second signal stops at once)\n";
      const ssize_t ignored = ::write(STDERR_FILENO, message, sizeof message - 1);
      (void)ignored;
    }
    return;
  }
  // The second: stop now. unlink and _exit are async-signal-safe.
  if (g_pending[0] != '\0') ::unlink(g_pending);
  static const char message[] = "rn50: second signal: stopping at once\n";
  const ssize_t ignored = ::write(STDERR_FILENO, message, sizeof message - 1);
  (void)ignored;
  ::_exit(128 + sig);
}

}  // namespace

void install_handlers(bool announce) {
  if (announce) g_announce.store(true);
  if (g_installed.exchange(true)) return;
  struct sigaction action;
  std::memset(&action, 0, sizeof action);
  action.sa_handler = on_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;  // blocking reads and waits go on; the loop checks the flag between steps
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
}

void install_exit_handlers() {
  g_exit_at_once.store(true);
  install_handlers();
}

int requested() { return g_requested.load(std::memory_order_relaxed); }

void request(int signal_number) {
  int expected = 0;
  g_requested.compare_exchange_strong(expected, signal_number);
}

std::string signal_name(int signal_number) {
  if (signal_number == SIGINT) return "SIGINT";
  if (signal_number == SIGTERM) return "SIGTERM";
  return "signal " + std::to_string(signal_number);
}

void set_pending_temporary(const std::string& path) {
  if (path.size() >= sizeof g_pending) {
    g_pending[0] = '\0';
    return;
  }
  // Cleared first and the terminator written last, so that the handler never sees a half-copied path.
  g_pending[0] = '\0';
  std::memcpy(g_pending + 1, path.c_str() + 1, path.size());  // path[1..] and its terminator
  std::atomic_signal_fence(std::memory_order_seq_cst);
  g_pending[0] = path.empty() ? '\0' : path[0];
}

}  // namespace rn50::stop
