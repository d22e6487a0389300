#!/usr/bin/env bash
# Configures and builds rn50 into BUILD_DIR (default build/). The same script builds on the developer
# machine (Debian LibTorch, CPU), on a GPU machine (the LibTorch inside pip torch) and in the Dockerfile.
#   RN50_TORCH=auto|debian|pip   which LibTorch (auto: pip torch's when python3 has torch, else Debian's)
#   RN50_OPENCV_DEBS=DIR         unpack OpenCV .deb files from DIR into BUILD_DIR/opencv and use them
#   RN50_CMAKE_ARGS="..."        extra CMake arguments (e.g. -DRN50_CUDA_ARCHS=90)
#   RN50_BUILD_TARGETS="..."     only these targets (e.g. "rn50 rn50_tests"); default every one
#   RN50_JOBS=N                  parallel compile jobs (default every core)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=$(realpath -m "${1:-$root/build}")
mode=${RN50_TORCH:-auto}
args=(-G Ninja -DCMAKE_BUILD_TYPE=Release)
if [[ "$mode" == auto ]]; then
  if python3 -c 'import torch' 2>/dev/null && [[ ! -d /usr/lib/x86_64-linux-gnu/cmake/Torch ]]; then mode=pip; else mode=debian; fi
fi
if [[ "$mode" == pip ]]; then
  prefix=$(python3 -c 'import torch; print(torch.utils.cmake_prefix_path)')
  args+=(-DCMAKE_PREFIX_PATH="$prefix")
fi
if [[ -n "${RN50_OPENCV_DEBS:-}" ]]; then
  mkdir -p "$build/opencv"
  for deb in "$RN50_OPENCV_DEBS"/*.deb; do dpkg -x "$deb" "$build/opencv"; done
  args+=(-DOpenCV_DIR="$build/opencv/usr/lib/x86_64-linux-gnu/cmake/opencv4")
  export LD_LIBRARY_PATH="$build/opencv/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}"
fi
command -v ccache >/dev/null && args+=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
echo "rn50: LibTorch from $mode; building in $build"
# shellcheck disable=SC2086
cmake -S "$root" -B "$build" "${args[@]}" ${RN50_CMAKE_ARGS:-}
# RN50_BUILD_TARGETS: only these targets (a GPU session that needs only some binaries).
cmake --build "$build" -j "${RN50_JOBS:-$(nproc)}" ${RN50_BUILD_TARGETS:+--target $RN50_BUILD_TARGETS}
