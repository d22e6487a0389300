// core/cpu_use.h: the CPU time the host and this process spent, read twice: how many cores other processes kept busy
// in between (a run's epochs record it; rn50 compare warns where it made a rate a busy machine's).
#pragma once

#include <optional>
#include <string>

namespace rn50 {

struct CpuTimes {
  std::optional<double> host_busy_s;  // every CPU's non-idle time since boot (/proc/stat), seconds; none unreadable
  double own_s = 0;                   // this process's user and system time, all its threads (getrusage)
  double wall_s = 0;                  // a steady clock
};
CpuTimes read_cpu_times();

// The busy seconds of /proc/stat's text: the "cpu" line's user, nice, system, irq, softirq and steal ticks (guest
// time is inside user and nice) over `ticks_per_s`; none where the line is missing or malformed.
std::optional<double> parse_host_busy_s(const std::string& proc_stat, double ticks_per_s);

// The cores other processes kept busy on average from `from` to `to`: the host's busy time less this process's
// times `processes` (the processes of one data-parallel run on this host use about as much CPU each, and are the
// run, not other work), per wall second, never below 0. None without the host's times or without time passing.
std::optional<double> other_processes_cores(const CpuTimes& from, const CpuTimes& to, int processes);

}  // namespace rn50
