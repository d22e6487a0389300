// core/build_info.cpp: the build's facts, from the headers CMake generates (rn50_build_config.h at configure time,
// rn50_revision.h at every build).
#include "core/build_info.h"

#include "rn50_build_config.h"
#include "rn50_revision.h"

namespace rn50 {

std::string version() { return RN50_VERSION; }
std::string revision() { return RN50_REVISION; }

std::vector<std::pair<std::string, std::string>> build_facts() {
  const bool cuda = std::string(RN50_CUDA_VERSION) != "";
  std::vector<std::pair<std::string, std::string>> facts = {
      {"version", RN50_VERSION},
      {"revision", RN50_REVISION},
      {"build", std::string(RN50_BUILD_TYPE) + ", " + RN50_COMPILER},
      {"LibTorch", std::string(RN50_TORCH_VERSION) + (cuda ? " (CUDA)" : " (CPU only)")},
  };
  if (cuda) {
    facts.emplace_back("CUDA", RN50_CUDA_VERSION);
    facts.emplace_back("cuDNN", RN50_CUDNN_VERSION);
    facts.emplace_back("kernels", std::string("SASS [") + RN50_SASS_ARCHS + "], PTX [" + RN50_PTX_ARCHS + "]");
    facts.emplace_back("nvJPEG", RN50_NVJPEG ? "yes (decode: gpu)" : "no (decode: gpu unavailable)");
  }
  facts.emplace_back("OpenCV", RN50_OPENCV_VERSION);
  facts.emplace_back("libjpeg", RN50_JPEG_VERSION);
  return facts;
}

std::string build_summary() {
  std::string line = std::string("rn50 ") + RN50_VERSION + " (" + RN50_REVISION + "), " + RN50_BUILD_TYPE +
                     ", LibTorch " + RN50_TORCH_VERSION;
  if (std::string(RN50_CUDA_VERSION) != "") {
    line += std::string(" CUDA ") + RN50_CUDA_VERSION + " cuDNN " + RN50_CUDNN_VERSION + ", kernels SASS [" +
            RN50_SASS_ARCHS + "] PTX [" + RN50_PTX_ARCHS + "]";
  } else {
    line += " (CPU only)";
  }
  return line;
}

}  // namespace rn50
