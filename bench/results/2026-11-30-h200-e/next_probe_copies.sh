#!/usr/bin/env bash
# Prepared on 2026-11-30 (e) for the next GPU session, not yet run: does moving the per-batch host-to-device copies
# (crop jobs, labels) off the compute stream shorten nvJPEG's slowest hardware calls and the gaps between steps?
# The patch (next_copies_on_decode_stream.patch.txt, compiled here with nvcc and g++ but never run) copies both
# tables on the decode stream before decode_done and lets the crop kernel write the labels, so that the compute
# stream queues no copy. Run from the repository root after `STAGES="build" bench/gpu_session.sh`, with
# RN50_BUILD_TARGETS="rn50 rn50_cuda_tests":
#   OUT=$OUT timeout 500 bash bench/results/2026-11-30-h200-e/next_probe_copies.sh
set -uo pipefail
P=$OUT/probe_copies; mkdir -p "$P"
build=$PWD/build-gpu
export LD_LIBRARY_PATH=$build/opencv/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
[[ -d /tmp/jpeg ]] || "$build/rn50" make-sample --out /tmp/jpeg --classes 16 --per-class 800 --val-per-class 8 --size 375 \
  > "$P/make_jpeg.log" 2>&1
cp "$build/rn50" /tmp/rn50_base
git apply bench/results/2026-11-30-h200-e/next_copies_on_decode_stream.patch.txt || exit 1
cmake --build "$build" --target rn50 rn50_cuda_tests > "$P/build_patched.log" 2>&1 || { tail -20 "$P/build_patched.log"; exit 1; }
git apply -R bench/results/2026-11-30-h200-e/next_copies_on_decode_stream.patch.txt
"$build/tests/rn50_cuda_tests" --gtest_filter='GpuDecode*:GeneratedJpegs*' > "$P/gpu_decode_tests_patched.log" 2>&1
echo "patched GPU decode tests exit $?"; grep -E "FAILED  \]|PASSED" "$P/gpu_decode_tests_patched.log"
cp "$build/rn50" /tmp/rn50_patched
run() {  # name, binary, extra args
  rm -rf "/tmp/runs/$1"
  "$2" train --config configs/optimized.yaml --data-root /tmp/jpeg --device cuda:0 --epochs 5 --warmup-epochs 0 \
    --log-every 100000 --validate=off --out-dir "/tmp/runs/$1" "${@:3}" > "$P/$1.log" 2>&1 || tail -3 "$P/$1.log"
  cp "/tmp/runs/$1/metrics.jsonl" "$P/$1.jsonl"
}
for rep in 1 2; do
  run base_$rep /tmp/rn50_base --decode gpu
  run copies_$rep /tmp/rn50_patched --decode gpu
  run synthetic_$rep /tmp/rn50_base --data synthetic --synthetic-images 12800
done
python3 - "$P" <<'PY'
import glob, json, os, statistics, sys
for name in ("base", "copies", "synthetic"):
    rs = [r for f in sorted(glob.glob(os.path.join(sys.argv[1], name + "_[0-9].jsonl")))
          for r in map(json.loads, open(f)) if r.get("type") == "epoch" and r["epoch"] >= 4]
    if not rs: continue
    ms = lambda k: 1e3 * statistics.mean(r.get(k) or 0 for r in rs)
    print(f"{name:10s} epochs 4-5 {[round(r['images_per_s']) for r in rs]}  between {ms('between_steps_s'):.1f} ms"
          f"  slowest call {ms('gpu_decode_slowest_hardware_call_s'):.1f} ms  input {ms('input_s'):.1f} ms")
PY
