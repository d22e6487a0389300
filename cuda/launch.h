// cuda/launch.h: the launch shapes rn50's elementwise kernels share: threads a block, the grid bound of grid-stride
// loops, the widest load a thread makes, and the grid size that fills a GPU.
#pragma once

namespace rn50::cuda::launch {

inline constexpr int kThreads = 256;        // a block: eight warps, enough to hide latency at full occupancy
inline constexpr int kWarp = 32;            // lanes of a warp
inline constexpr int kMaxBlocks = 65535;    // grid-stride loops cap their grid here and loop over the rest
inline constexpr int kVectorBytes = 16;     // one 128-bit load or store a thread: 8 halves, 4 floats
inline constexpr int kFillSms = 132;        // an H200's SMs: the fixed grids below aim to fill one
inline constexpr int kFillBlocksPerSm = 8;  // resident blocks of kThreads per SM that fill it

// Blocks of kThreads for n independent items, at most kMaxBlocks (the kernel loops over the rest).
inline int blocks_for(long long n) {
  const long long blocks = (n + kThreads - 1) / kThreads;
  return static_cast<int>(blocks < kMaxBlocks ? blocks : kMaxBlocks);
}

}  // namespace rn50::cuda::launch
