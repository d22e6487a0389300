// core/cpu_use.cpp: /proc/stat and getrusage read, and the other processes' share of the host's CPUs worked out.
#include "core/cpu_use.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <sstream>

namespace rn50 {

std::optional<double> parse_host_busy_s(const std::string& proc_stat, double ticks_per_s) {
  std::istringstream lines(proc_stat);
  std::string line;
  if (ticks_per_s <= 0 || !std::getline(lines, line) || line.rfind("cpu ", 0) != 0) return std::nullopt;
  std::istringstream fields(line.substr(4));
  // user nice system idle iowait irq softirq steal: the first eight, which every kernel since 2.6.11 writes.
  double t[8];
  for (double& x : t) {
    if (!(fields >> x) || x < 0) return std::nullopt;
  }
  return (t[0] + t[1] + t[2] + t[5] + t[6] + t[7]) / ticks_per_s;
}

CpuTimes read_cpu_times() {
  CpuTimes times;
  std::ifstream stat("/proc/stat");
  std::string first;
  std::getline(stat, first);
  times.host_busy_s = parse_host_busy_s(first, static_cast<double>(::sysconf(_SC_CLK_TCK)));
  rusage usage{};
  if (::getrusage(RUSAGE_SELF, &usage) == 0) {
    auto seconds = [](const timeval& t) { return static_cast<double>(t.tv_sec) + t.tv_usec / 1e6; };
    times.own_s = seconds(usage.ru_utime) + seconds(usage.ru_stime);
  }
  times.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
  return times;
}

std::optional<double> other_processes_cores(const CpuTimes& from, const CpuTimes& to, int processes) {
  const double wall = to.wall_s - from.wall_s;
  if (!from.host_busy_s || !to.host_busy_s || wall <= 0) return std::nullopt;
  const double others = (*to.host_busy_s - *from.host_busy_s) - std::max(1, processes) * (to.own_s - from.own_s);
  return std::max(0.0, others / wall);
}

}  // namespace rn50
