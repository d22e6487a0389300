#!/usr/bin/env bash
# Builds the libFuzzer targets (clang, AddressSanitizer and UBSan, no LibTorch: -DRN50_FUZZ=ON) and runs each for a
# bounded time, starting from the committed seeds and replaying every kept regression input first.
#   scripts/fuzz.sh [SECONDS] [BUILD_DIR]    SECONDS a target (default 60); BUILD_DIR default build-fuzz
#   FUZZ_TARGETS="fuzz_safetensors fuzz_jpeg fuzz_config fuzz_report fuzz_plan_cache"   FUZZ_PARALLEL=1: all targets at once
#   scripts/fuzz.sh --seeds                  rewrites tests/fuzz/corpus from fuzz_seeds (after a format change)
# New coverage goes to BUILD_DIR/corpus/<target> (not the tree). A finding leaves its input in BUILD_DIR/findings,
# which belongs, once fixed, in tests/fuzz/regressions/<target>/; the script exits non-zero.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
seeds_only=0
if [[ "${1:-}" == --seeds ]]; then seeds_only=1; shift; fi
seconds=${1:-60}
build=$(realpath -m "${2:-$root/build-fuzz}")
targets=${FUZZ_TARGETS:-fuzz_safetensors fuzz_jpeg fuzz_config fuzz_report fuzz_plan_cache}
mkdir -p "$build"
command -v clang++ > /dev/null || { echo "scripts/fuzz.sh: clang++ not found (Debian package clang)"; exit 1; }
CC=clang CXX=clang++ cmake -S "$root" -B "$build" -G Ninja -DRN50_FUZZ=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo > "$build/configure.log" 2>&1 \
  || { tail -20 "$build/configure.log"; exit 1; }
cmake --build "$build" -j "${RN50_JOBS:-$(nproc)}" > "$build/build.log" 2>&1 || { grep -E "error" "$build/build.log" | head -20; exit 1; }
if (( seeds_only )); then
  rm -rf "$root/tests/fuzz/corpus"
  "$build/tests/fuzz/fuzz_seeds" "$root/tests/fuzz/corpus" "$root/configs" \
    "$root/bench/results/2026-12-01-reports/inputs/cpu-2core-b64-baseline" \
    "$root/bench/results/2026-12-01-reports/inputs/h200-x2-fp16-cl-graph"
  exit 0
fi
declare -A kind=([fuzz_safetensors]=safetensors [fuzz_jpeg]=jpeg [fuzz_config]=config [fuzz_report]=report
                 [fuzz_plan_cache]=plan_cache)
mkdir -p "$build/findings"
run() {  # target: fuzz it for $seconds; its log in $build/<target>.log
  local t=$1 k=${kind[$1]}
  mkdir -p "$build/corpus/$t" "$root/tests/fuzz/regressions/$k"
  "$build/tests/fuzz/$t" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=65536 \
    -print_final_stats=1 -artifact_prefix="$build/findings/$t-" \
    "$build/corpus/$t" "$root/tests/fuzz/corpus/$k" "$root/tests/fuzz/regressions/$k" > "$build/$t.log" 2>&1
}
failed=0
if [[ "${FUZZ_PARALLEL:-0}" == 1 ]]; then
  declare -A pids
  for t in $targets; do run "$t" & pids[$t]=$!; done
  for t in $targets; do wait "${pids[$t]}" || { failed=1; echo "$t: FAILED (log: $build/$t.log)"; }; done
else
  for t in $targets; do run "$t" || { failed=1; echo "$t: FAILED (log: $build/$t.log)"; }; done
fi
for t in $targets; do
  runs=$(grep -Eo "stat::number_of_executed_units: *[0-9]+" "$build/$t.log" | grep -Eo "[0-9]+$" || echo "?")
  cov=$(grep -Eo "cov: [0-9]+" "$build/$t.log" | tail -1 || true)
  echo "$t: ${seconds} s, ${runs} inputs, ${cov:-cov: ?}$(grep -q "ERROR\|deadly signal" "$build/$t.log" && echo ", FINDING")"
done
exit $failed
