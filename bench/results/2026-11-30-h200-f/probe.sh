#!/usr/bin/env bash
# 2026-11-30 (f): decode_crop_ahead (the crop kernel on the decode stream at submit, the input copied between
# steps) against the committed path (crop on the compute stream) and synthetic data; its GPU and e2e tests.
# Run at commit db11d45 (call 3); decode_crop_ahead was reverted after it: apply crop_ahead.patch.txt (made against
# 61ca7dd) first to run it again.
# Run from the repository root after
#   RN50_BUILD_TARGETS="rn50 rn50_cuda_tests rn50_e2e_tests" STAGES="build" bench/gpu_session.sh
# as: OUT=$OUT REPS=2 timeout 500 bash bench/results/2026-11-30-h200-f/probe.sh
set -uo pipefail
P=$OUT/probe; mkdir -p "$P"
build=$PWD/build-gpu
export LD_LIBRARY_PATH=$build/opencv/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
[[ -d /tmp/jpeg ]] || "$build/rn50" make-sample --out /tmp/jpeg --classes 16 --per-class 800 --val-per-class 8 --size 375 \
  > "$P/make_jpeg.log" 2>&1 &
"$build/tests/rn50_cuda_tests" --gtest_filter='GpuDecode*:GeneratedJpegs*' > "$P/gpu_decode_tests.log" 2>&1
echo "GPU decode tests exit $?"; grep -E "FAILED  \]|PASSED|\[  FAILED|^\[ measured \] [0-9]+ batches" "$P/gpu_decode_tests.log"
"$build/tests/rn50_e2e_tests" --gtest_filter='Cli.GpuDecode*' > "$P/e2e_tests.log" 2>&1
echo "e2e GPU decode tests exit $?"; grep -E "FAILED  \]|PASSED|OK \]" "$P/e2e_tests.log"
wait
for v in base crop_ahead; do
  "$build/rn50" bench-decode --decode gpu --data-root /tmp/jpeg/train --files 512 --seconds 4 \
    $([[ $v == crop_ahead ]] && echo --decode-crop-ahead) > "$P/bench_decode_$v.txt" 2>&1
  echo "$v: $(grep -E '^train|crop kernel' "$P/bench_decode_$v.txt" | tr '\n' ' ')"
done
run() {  # name, extra args
  rm -rf "/tmp/runs/$1"
  "$build/rn50" train --config configs/optimized.yaml --device cuda:0 --epochs 5 --warmup-epochs 0 \
    --log-every 100000 --validate=off --out-dir "/tmp/runs/$1" "${@:2}" > "$P/$1.log" 2>&1 || tail -3 "$P/$1.log"
  cp "/tmp/runs/$1/metrics.jsonl" "$P/$1.jsonl"
}
for rep in $(seq "${REPS:-2}"); do
  run "base_$rep" --data-root /tmp/jpeg --decode gpu
  run "crop_ahead_$rep" --data-root /tmp/jpeg --decode gpu --decode-crop-ahead=on
  run "synthetic_$rep" --data synthetic --synthetic-images 12800
done
grep -h "(decode)" "$P"/crop_ahead_1.log | head -1
python3 - "$P" <<'PY'
import glob, json, os, statistics, sys
rates = {}
print("run          epoch 4-5 img/s        ms per epoch: fwd+bwd  input  between  crop(compute)  decode latency")
for name in ("base", "crop_ahead", "synthetic"):
    rs = [r for f in sorted(glob.glob(os.path.join(sys.argv[1], name + "_[0-9].jsonl")))
          for r in map(json.loads, open(f)) if r.get("type") == "epoch" and r["epoch"] >= 4]
    if not rs: continue
    rates[name] = statistics.mean(r["images_per_s"] for r in rs)
    ms = lambda k: 1e3 * statistics.mean(r.get(k) or 0 for r in rs)
    print(f"{name:12s} {[round(r['images_per_s']) for r in rs]}  {ms('forward_backward_s'):7.1f} {ms('input_s'):6.1f}"
          f" {ms('between_steps_s'):8.1f} {ms('gpu_decode_crop_s'):13.1f} {ms('gpu_decode_latency_s'):14.1f}")
syn = rates.get("synthetic")
for name in ("base", "crop_ahead"):
    if syn and name in rates: print(f"{name:12s} {rates[name]:6.0f} img/s, {100 * (1 - rates[name] / syn):.2f}% below synthetic {syn:.0f} (goal 3%)")
PY
tar -czf "$OUT/probe.tar.gz" -C "$P" . && rm -rf "$P"  # one file: the tool brings back only a few
