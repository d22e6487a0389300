// core/affinity.h: the CPUs this process may run on (its affinity mask), and pinning the calling thread to one.
#pragma once

#include <pthread.h>

#include <vector>

namespace rn50 {

// The ids of the CPUs in this process's affinity mask, ascending; {0} if the mask cannot be read.
std::vector<int> usable_cpus();

// Pins `thread` (a std::thread's native_handle()) to `cpu`. Returns false (and leaves the thread as it was) if the
// system refuses.
bool pin_thread(pthread_t thread, int cpu);
inline bool pin_this_thread(int cpu) { return pin_thread(pthread_self(), cpu); }

}  // namespace rn50
