// parallel/launch.cpp: fork/exec of the ranks, signal forwarding, and stopping the others when one fails.
#include "parallel/launch.h"

#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "core/errors.h"

extern char** environ;

namespace rn50::parallel {
namespace {

// The environment of one rank: this process's, with torchrun's variables for `rank` in place of any it had.
std::vector<std::string> rank_environment(int rank, int processes, int port) {
  const std::vector<std::pair<std::string, std::string>> ours = {{"RANK", std::to_string(rank)},
                                                                 {"LOCAL_RANK", std::to_string(rank)},
                                                                 {"WORLD_SIZE", std::to_string(processes)},
                                                                 {"LOCAL_WORLD_SIZE", std::to_string(processes)},
                                                                 {"MASTER_ADDR", "127.0.0.1"},
                                                                 {"MASTER_PORT", std::to_string(port)}};
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e) {
    const std::string entry(*e);
    bool replaced = false;
    for (const auto& [name, value] : ours) replaced |= entry.rfind(name + "=", 0) == 0;
    if (!replaced) env.push_back(entry);
  }
  for (const auto& [name, value] : ours) env.push_back(name + "=" + value);
  return env;
}

int free_port() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) throw std::runtime_error(std::string("socket: ") + std::strerror(errno));
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = 0;
  socklen_t length = sizeof(address);
  const bool ok = bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0 &&
                  getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) == 0;
  close(fd);
  if (!ok) throw std::runtime_error(std::string("finding a free port: ") + std::strerror(errno));
  return ntohs(address.sin_port);
}

// How long the ranks get to stop after a forwarded signal: they finish a step, checkpoint and write their report.
constexpr int kSignalGraceS = 25;

int exit_code_of(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

std::string describe_status(int status) {
  if (WIFSIGNALED(status)) return std::string("was killed by signal ") + strsignal(WTERMSIG(status));
  return "exited with code " + std::to_string(exit_code_of(status));
}

}  // namespace

int launch_local(const LaunchOptions& options) {
  if (options.processes < 1 || options.processes > kMaxLocalProcesses) {
    throw ConfigError("launch: --nproc must be 1 to " + std::to_string(kMaxLocalProcesses) + " (got " +
                      std::to_string(options.processes) + ")");
  }
  if (options.master_port < 0 || options.master_port > 65535) {
    throw ConfigError("launch: --master-port must be a TCP port, 1 to 65535, or 0 for a free one (got " +
                      std::to_string(options.master_port) + ")");
  }
  if (options.grace_s < 0 || options.grace_s > 3600) {
    throw ConfigError("launch: --grace must be 0 to 3600 seconds (got " + std::to_string(options.grace_s) + ")");
  }
  if (options.args.empty())
    throw ConfigError("launch: name the command to run after '--', e.g. rn50 launch --nproc 2 -- train ...");
  const int port = options.master_port > 0 ? options.master_port : free_port();

  // Signals are taken synchronously (sigtimedwait) so that no handler state is needed; children unblock them.
  sigset_t watched, previous;
  sigemptyset(&watched);
  sigaddset(&watched, SIGINT);
  sigaddset(&watched, SIGTERM);
  sigaddset(&watched, SIGHUP);
  sigaddset(&watched, SIGCHLD);
  sigprocmask(SIG_BLOCK, &watched, &previous);

  // Everything the child needs is built before fork: between fork and exec only async-signal-safe calls.
  std::vector<char*> argv;
  argv.push_back(const_cast<char*>(options.program.c_str()));
  for (const auto& a : options.args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  std::vector<std::vector<std::string>> environments;
  std::vector<std::vector<char*>> envps;
  for (int rank = 0; rank < options.processes; ++rank)
    environments.push_back(rank_environment(rank, options.processes, port));
  for (auto& env : environments) {
    envps.emplace_back();
    for (auto& entry : env) envps.back().push_back(entry.data());
    envps.back().push_back(nullptr);
  }

  std::vector<pid_t> pids(static_cast<size_t>(options.processes), -1);
  for (int rank = 0; rank < options.processes; ++rank) {
    const pid_t pid = fork();
    if (pid < 0) {
      const int error = errno;
      for (const pid_t started : pids) {
        if (started > 0) kill(started, SIGTERM);
      }
      for (const pid_t started : pids) {
        if (started > 0) waitpid(started, nullptr, 0);
      }
      sigprocmask(SIG_SETMASK, &previous, nullptr);
      throw std::runtime_error(std::string("launch: fork: ") + std::strerror(error));
    }
    if (pid == 0) {
      // A process group of its own: a Ctrl-C on the terminal reaches the launcher alone, which passes it on once (a
      // rank that got it twice, from the terminal and from here, would stop at once instead of at its next step).
      setpgid(0, 0);
      sigprocmask(SIG_SETMASK, &previous, nullptr);
      execve(options.program.c_str(), argv.data(), envps[static_cast<size_t>(rank)].data());
      static const char kMessage[] = "rn50 launch: cannot start the rank's program\n";
      (void)!write(STDERR_FILENO, kMessage, sizeof(kMessage) - 1);
      _exit(127);
    }
    pids[static_cast<size_t>(rank)] = pid;
  }
  std::fprintf(stderr, "rn50 launch: %d processes, rendezvous at 127.0.0.1:%d\n", options.processes, port);

  auto signal_running = [&pids](int sig) {
    for (const pid_t pid : pids) {
      if (pid > 0) kill(pid, sig);
    }
  };
  int result = 0;
  int running = options.processes;
  bool stopping = false;
  auto stop_deadline = std::chrono::steady_clock::time_point::max();
  while (running > 0) {
    int status = 0;
    const pid_t done = waitpid(-1, &status, WNOHANG);
    if (done > 0) {
      for (size_t rank = 0; rank < pids.size(); ++rank) {
        if (pids[rank] != done) continue;
        pids[rank] = -1;
        --running;
        const int code = exit_code_of(status);
        // A rank that exited 130 or 143 itself stopped on a signal, after a step every rank agreed on: the others stop
        // there too, by themselves, with its grace. A signal from here would be their second, which ends a rank at
        // once, mid-checkpoint.
        const bool stopped_by_signal = WIFEXITED(status) && (code == 128 + SIGINT || code == 128 + SIGTERM);
        if (stopped_by_signal && !stopping && running > 0) {
          stopping = true;
          stop_deadline =
              std::chrono::steady_clock::now() + std::chrono::seconds(std::max(options.grace_s, kSignalGraceS));
        }
        if (code != 0 && result == 0) {
          result = code;
          if (!stopping && running > 0) {
            std::fprintf(stderr, "rn50 launch: rank %zu %s; stopping the other %d\n", rank,
                         describe_status(status).c_str(), running);
            signal_running(SIGTERM);
            stopping = true;
            stop_deadline = std::chrono::steady_clock::now() + std::chrono::seconds(options.grace_s);
          }
        }
      }
      continue;
    }
    if (stopping && std::chrono::steady_clock::now() > stop_deadline) {
      std::fprintf(stderr, "rn50 launch: %d process(es) still running after %d s; killing them\n", running,
                   options.grace_s);
      signal_running(SIGKILL);
      stop_deadline = std::chrono::steady_clock::time_point::max();
    }
    timespec wait_time{0, 200 * 1000 * 1000};
    const int sig = sigtimedwait(&watched, nullptr, &wait_time);
    if (sig == SIGINT || sig == SIGTERM || sig == SIGHUP) {
      // A hang-up (the terminal closed) stops the ranks as SIGTERM does: they are in groups of their own.
      const int forwarded = sig == SIGHUP ? SIGTERM : sig;
      std::fprintf(stderr, "rn50 launch: got %s; passing %s on\n", strsignal(sig), strsignal(forwarded));
      signal_running(forwarded);
      if (result == 0) result = 128 + forwarded;
      if (!stopping) {
        // The ranks stop at their next agreed step and write a checkpoint: a signal gets a cloud's usual grace.
        stopping = true;
        stop_deadline =
            std::chrono::steady_clock::now() + std::chrono::seconds(std::max(options.grace_s, kSignalGraceS));
      }
    }
  }
  sigprocmask(SIG_SETMASK, &previous, nullptr);
  return result;
}

}  // namespace rn50::parallel
