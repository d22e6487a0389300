// core/build_info.h: what this rn50 is: its version, the source revision, how it was built and what it was built
// against (LibTorch, CUDA, cuDNN, nvJPEG, OpenCV, libjpeg), for `rn50 --version`, the start-up table and run.json.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace rn50 {

// "0.9.0".
std::string version();
// The git revision it was built from ("1a2b3c4d5e6f", "...+changes" for uncommitted edits, "unknown").
std::string revision();
// One line: "rn50 0.9.0 (1a2b3c4d5e6f), Release, LibTorch 2.11.0 CUDA 13.0 cuDNN 9.19.0, kernels sm_90 + PTX 90".
std::string build_summary();
// Every fact, one (name, value) per line of `rn50 --version`.
std::vector<std::pair<std::string, std::string>> build_facts();

}  // namespace rn50
