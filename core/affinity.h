// core/affinity.h: the CPUs this process may run on (its affinity mask), and pinning the calling thread to one.
#pragma once

#include <vector>

namespace rn50 {

// The ids of the CPUs in this process's affinity mask, ascending; {0} if the mask cannot be read.
std::vector<int> usable_cpus();

// Pins the calling thread to `cpu`. Returns false (and leaves the thread as it was) if the system refuses. Only the
// thread itself: pinning another through its handle applies the mask to the caller once that thread has ended.
bool pin_this_thread(int cpu);

}  // namespace rn50
