// gpu/no_cuda.cpp: the CPU-only build's stand-ins for gpu/cuda_support.h.
#include "core/errors.h"
#include "gpu/cuda_support.h"

namespace rn50::gpu {

bool built_with_cuda() { return false; }

std::shared_ptr<data::HostAllocator> make_pinned_allocator() {
  throw ConfigError("config key 'pin_memory': this rn50 was built without CUDA");
}

std::optional<double> peak_memory_gib(int) { return std::nullopt; }
void reset_peak_memory(int) {}
std::string describe_device(int) { return "no CUDA in this build"; }

}  // namespace rn50::gpu
