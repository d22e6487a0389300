#!/usr/bin/env bash
# 2026-11-30 (e), after `STAGES="build jpeg gpudecode" bench/gpu_session.sh` in the same call: the new GPU tests,
# what kernels nvJPEG's hardware path runs with planar (YUV) output, and GPU decoding with nvJPEG's streams at the
# compute stream's priority instead of high priority (a patch applied here, reverted after).
set -uo pipefail
P=$OUT/probe; mkdir -p "$P"
build=$PWD/build-gpu
export LD_LIBRARY_PATH=$build/opencv/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
"$build/tests/rn50_cuda_tests" --gtest_filter='Cuda.StepTimer*' > "$P/step_timer_tests.log" 2>&1
echo "step timer tests exit $?"; grep -E "measured|FAILED  \]|PASSED" "$P/step_timer_tests.log"
"$build/tests/rn50_e2e_tests" --gtest_filter='Cli.GpuDecode*' > "$P/e2e_gpu_decode.log" 2>&1
echo "e2e gpu decode tests exit $?"; grep -E "FAILED  \]|PASSED|OK \]" "$P/e2e_gpu_decode.log"
# Kernels of 3 batches of 256 (the first is nvJPEG's warm-up), planar output, then RGB for comparison.
for mode in yuv; do  # RGB's: one ycbcr_to_format_kernel_roi per image (2026-11-30-h200-d.md)
  flag=$([[ $mode == yuv ]] && echo --decode-yuv)
  timeout 45 ncu --launch-count 400 --print-summary per-kernel --metrics gpu__time_duration.sum \
    "$build/rn50" bench-decode --decode gpu $flag --files 256 --seconds 0.3 > "$P/ncu_$mode.txt" 2>&1
  echo "ncu $mode exit $?"; grep -E "^  [a-zA-Z_].*\(|Invocations|gpu__time_duration.sum" "$P/ncu_$mode.txt" | head -30
done
# nvJPEG's streams at normal priority (the compute stream's), five epochs, against this call's synthetic runs.
cp gpu/gpu_decoder.cpp /tmp/gpu_decoder.cpp.orig
sed -i 's|getStreamFromPool(/\*isHighPriority=\*/true|getStreamFromPool(/*isHighPriority=*/false|g' gpu/gpu_decoder.cpp
grep -c "isHighPriority=\*/false" gpu/gpu_decoder.cpp
cmake --build "$build" --target rn50 > "$P/rebuild_normal_priority.log" 2>&1 || tail -5 "$P/rebuild_normal_priority.log"
cp /tmp/gpu_decoder.cpp.orig gpu/gpu_decoder.cpp  # the build keeps the patched rn50 for the runs below
for rep in 1; do
  rm -rf /tmp/runs/prio_$rep
  "$build/rn50" train --config configs/optimized.yaml --data-root /tmp/jpeg --device cuda:0 --epochs 5 --warmup-epochs 0 \
    --log-every 100000 --validate=off --out-dir /tmp/runs/prio_$rep --decode gpu > "$P/gpu_decode_normal_priority_$rep.log" 2>&1
  cp /tmp/runs/prio_$rep/metrics.jsonl "$P/gpu_decode_normal_priority_$rep.jsonl"
done
python3 - "$P" <<'PY'
import glob, json, os, statistics, sys
for f in sorted(glob.glob(os.path.join(sys.argv[1], "*.jsonl"))):
    rs = [r for r in map(json.loads, open(f)) if r.get("type") == "epoch"]
    print(os.path.basename(f), [round(r["images_per_s"]) for r in rs],
          "epochs 4-5: fwd+bwd %.1f input %.1f between %.1f ms" % tuple(
              1e3 * statistics.mean(r.get(k) or 0 for r in rs if r["epoch"] >= 4)
              for k in ("forward_backward_s", "input_s", "between_steps_s")))
PY
