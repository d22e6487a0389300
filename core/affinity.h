// core/affinity.h: the CPUs this process may run on (its affinity mask), how many threads it may keep busy (the mask
// and the cgroup CPU quota), and pinning the calling thread to one.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace rn50 {

// The ids of the CPUs in this process's affinity mask, ascending; {0} if the mask cannot be read.
std::vector<int> usable_cpus();

// The threads this process may keep busy, at least 1: usable_cpus()' count, fewer where a cgroup CPU quota allows
// fewer (a container started with --cpus 2 still sees every core in its mask). What `workers: -1` starts.
int usable_cores();

// The CPU for thread k of a set pinned in turn: cpus[k mod their count] (`cpus` not empty).
inline int cpu_in_turn(const std::vector<int>& cpus, int64_t k) {
  return cpus[static_cast<std::size_t>(k) % cpus.size()];
}

// Pins the calling thread to `cpu`. Returns false (and leaves the thread as it was) if the system refuses. Only the
// thread itself: pinning another through its handle applies the mask to the caller once that thread has ended.
bool pin_this_thread(int cpu);

}  // namespace rn50
