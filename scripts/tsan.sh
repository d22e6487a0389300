#!/usr/bin/env bash
# Builds the data tests (the loader, its pools, the decode budget, the datasets and codecs) with ThreadSanitizer, every
# source instrumented, and runs those with threads: the loader's workers and its CPU decode share, the decode budget
# shared by them. (The GPU decoder's thread logic has its own ThreadSanitizer target in the main build.)
#   scripts/tsan.sh [BUILD_DIR]    default build-tsan;  TSAN_FILTER: the gtest filter
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=$(realpath -m "${1:-$root/build-tsan}")
mkdir -p "$build"
flags="-fsanitize=thread"
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DRN50_TSAN_TESTS=OFF \
  -DCMAKE_CXX_FLAGS="$flags" -DCMAKE_EXE_LINKER_FLAGS="$flags" -DCMAKE_SHARED_LINKER_FLAGS="$flags" \
  > "$build/configure.log" 2>&1 || { tail -20 "$build/configure.log"; exit 1; }
cmake --build "$build" -j "${RN50_JOBS:-$(nproc)}" --target rn50_data_tests > "$build/build.log" 2>&1 \
  || { grep -E "error" "$build/build.log" | head -20; exit 1; }
TSAN_OPTIONS="halt_on_error=1 ${TSAN_OPTIONS:-}" "$build/tests/rn50_data_tests" \
  --gtest_filter="${TSAN_FILTER:-BatchLoader.*:BatchPool.*:DecodeOnCpu.*:DecodeBudget*}" --gtest_brief=1
