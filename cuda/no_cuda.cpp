// cuda/no_cuda.cpp: the CPU-only build's stand-ins for cuda/cuda_support.h and cuda/device_ops.h.
#include "core/errors.h"
#include "cuda/cuda_support.h"
#include "cuda/device_ops.h"
#include "cuda/nvtx.h"

#include <stdexcept>
#include <string>

namespace rn50::cuda {

bool built_with_cuda() { return false; }

std::shared_ptr<HostAllocator> make_pinned_allocator() {
  throw ConfigError("config key 'pin_memory': this rn50 was built without CUDA");
}

std::shared_ptr<void> register_host_memory(void*, size_t, std::string* why_not) {
  if (why_not) *why_not = "built without CUDA";
  return nullptr;
}
std::optional<double> peak_memory_gib(int) { return std::nullopt; }
std::optional<double> peak_reserved_gib(int) { return std::nullopt; }
void reset_peak_memory(int) {}
std::optional<CudaVersions> cuda_versions() { return std::nullopt; }
std::optional<DeviceFacts> device_facts(int) { return std::nullopt; }
int device_count() { return 0; }
bool can_access_peer(int, int) { return false; }

NvtxRange::NvtxRange(const char*) {}
NvtxRange::~NvtxRange() = default;

}  // namespace rn50::cuda

// ---- cuda/device_ops.h: never reached in a CPU build (the trainer uses them only on CUDA devices) ----

namespace rn50::cuda {
namespace {
[[noreturn]] void no_cuda(const char* what) {
  throw std::logic_error(std::string(what) + ": this rn50 was built without CUDA");
}
}  // namespace

void use_side_stream(int) { no_cuda("use_side_stream"); }
void skip_high_priority_streams(int, int) { no_cuda("skip_high_priority_streams"); }
void normalize_into(const at::Tensor&, at::Tensor&, const float[3], const float[3]) { no_cuda("normalize_into"); }

class UpdateTable {};
FusedSgd::FusedSgd(std::vector<at::Tensor>, std::vector<at::Tensor>, std::vector<double>, double) {
  no_cuda("FusedSgd");
}
FusedSgd::~FusedSgd() = default;
void FusedSgd::step(const at::Tensor&, const at::Tensor*, const at::Tensor*) { no_cuda("FusedSgd"); }
void FusedSgd::refresh() { no_cuda("FusedSgd"); }
FusedAdamW::FusedAdamW(std::vector<at::Tensor>, std::vector<at::Tensor>, std::vector<at::Tensor>, std::vector<double>,
                       double, double, double) {
  no_cuda("FusedAdamW");
}
FusedAdamW::~FusedAdamW() = default;
void FusedAdamW::refresh() { no_cuda("FusedAdamW"); }
void FusedAdamW::step(const at::Tensor&, const at::Tensor&, const at::Tensor*, const at::Tensor*) {
  no_cuda("FusedAdamW");
}

struct CudaGraph::Impl {};
CudaGraph::CudaGraph() = default;
CudaGraph::~CudaGraph() = default;
void CudaGraph::capture(const std::function<void()>&) { throw std::runtime_error("this rn50 was built without CUDA"); }
void CudaGraph::replay() { no_cuda("CudaGraph"); }

std::string describe_kernels(int) { return "no CUDA in this build"; }
std::string use_expandable_segments() { return "unavailable without CUDA"; }

void release_cached_memory() {}

}  // namespace rn50::cuda
