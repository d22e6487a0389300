#!/usr/bin/env bash
# Installs what rn50 needs on Debian bookworm (or Ubuntu): compilers, CMake, LibTorch (CPU), OpenCV,
# libjpeg-turbo, cxxopts, spdlog, yaml-cpp, nlohmann-json, GoogleTest, Gloo headers, clang (fuzzing), torchvision
# (the round trips against it). Skips packages already present.
set -euo pipefail
packages=(build-essential cmake ninja-build ccache pkg-config libtorch-dev libopencv-dev libjpeg-dev
          libcxxopts-dev libspdlog-dev libyaml-cpp-dev nlohmann-json3-dev libgtest-dev libgloo-dev clang
          python3-torchvision)
# clang: libFuzzer and the sanitizers of scripts/fuzz.sh (the test command runs the fuzz targets).
# libgloo-dev: headers for Debian LibTorch's Gloo backend (data parallel on CPUs); a pip LibTorch uses NCCL.
# python3-torchvision: torchvision 0.14 for /usr/bin/python3, the ctest tests torchvision.RoundTrip.* (skipped without).
if [[ "${RN50_SKIP_TORCH:-0}" == 1 ]]; then
  packages=("${packages[@]/libtorch-dev}"); packages=("${packages[@]/libgloo-dev}"); packages=("${packages[@]/python3-torchvision}")
fi
missing=()
for p in "${packages[@]}"; do
  [[ -z "$p" ]] && continue
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "rn50: installing ${missing[*]}"
  sudo_cmd=""; [[ $(id -u) != 0 ]] && sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends "${missing[@]}"
else
  echo "rn50: all Debian packages present"
fi
