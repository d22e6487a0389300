#!/usr/bin/env bash
# Downloads Debian's OpenCV 4.6 (core, imgproc, and every module library its CMake files check for) into
# DIR (default .debs/), for a GPU machine that has no OpenCV for C++ and no network: carry DIR there and
# build with RN50_OPENCV_DEBS=DIR scripts/build.sh. rn50 links only core and imgproc.
set -euo pipefail
dir=${1:-.debs}
mkdir -p "$dir"
cd "$dir"
modules=$(apt-cache depends --recurse --no-recommends --no-suggests --no-conflicts --no-breaks --no-replaces \
            --no-enhances libopencv-dev | grep -o '^libopencv-[a-z0-9]*406$' | sort -u)
# shellcheck disable=SC2086
apt-get download libopencv-dev libopencv-core-dev libopencv-imgproc-dev $modules libtbb12 libglx0 libglvnd0 2>&1 |
  grep -v unsandboxed || true
ls -1 ./*.deb | wc -l
