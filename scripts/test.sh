#!/usr/bin/env bash
# The test command: installs what is missing, builds, runs every test under ctest, the loader's tests again under
# ThreadSanitizer (scripts/tsan.sh; RN50_TSAN=0 skips them), then each libFuzzer target for RN50_FUZZ_SECONDS (default
# 60; 0 skips them) with AddressSanitizer and UBSan (scripts/fuzz.sh).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/install-deps.sh"
"$root/scripts/build.sh" "$root/build"
cd "$root/build"
ctest --output-on-failure -j "${RN50_TEST_JOBS:-2}" "$@"
if [[ "${RN50_TSAN:-1}" != 0 ]]; then
  "$root/scripts/tsan.sh" "$root/build-tsan"
fi
if [[ "${RN50_FUZZ_SECONDS:-60}" != 0 ]]; then
  FUZZ_PARALLEL=1 "$root/scripts/fuzz.sh" "${RN50_FUZZ_SECONDS:-60}" "$root/build-fuzz"
fi
