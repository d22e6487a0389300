// cuda/nvtx.h: NvtxRange, a named range of this thread's work for profilers: under `ncu --nvtx --print-nvtx-rename
// kernel` each kernel takes the name of the innermost range it was launched in (the per-layer split of
// bench/gpu_session.sh's ncu stage). Without a profiler attached a range costs a call that does nothing; CPU builds,
// and CUDA builds without CUDA's NVTX headers, have no ranges at all.
#pragma once

namespace rn50::cuda {

class NvtxRange {
 public:
  explicit NvtxRange(const char* name);  // the profiler copies the name at the push
  ~NvtxRange();
  NvtxRange(const NvtxRange&) = delete;
  NvtxRange& operator=(const NvtxRange&) = delete;
};

}  // namespace rn50::cuda
