#!/usr/bin/env bash
# The test command: installs what is missing, builds, and runs every test under ctest.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/install-deps.sh"
"$root/scripts/build.sh" "$root/build"
cd "$root/build"
ctest --output-on-failure -j "${RN50_TEST_JOBS:-2}" "$@"
