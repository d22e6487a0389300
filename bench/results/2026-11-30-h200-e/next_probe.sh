#!/usr/bin/env bash
# Prepared on 2026-11-30 (e) for the next GPU session, not yet run. Two patches, each compiled here (nvcc, g++)
# but never run, measured one at a time against the committed path and synthetic data:
#   next_copies_on_decode_stream.patch.txt: the per-batch host-to-device copies (crop jobs, labels) on the decode
#     stream before decode_done, the labels written by the crop kernel, so that the compute stream queues no copy.
#     Question: do nvJPEG's slowest hardware calls (88-91 ms) and the gaps between steps shrink?
#   next_crop_tiles.patch.txt: the crop kernel in 32x8 output tiles (no per-thread 64-bit division, 2-D locality of
#     the source reads). Question: is it faster than 0.28 ms a batch, and still exact (the GPU tests)?
# Run from the repository root after `RN50_BUILD_TARGETS="rn50 rn50_cuda_tests" STAGES="build" bench/gpu_session.sh`:
#   OUT=$OUT timeout 540 bash bench/results/2026-11-30-h200-e/next_probe.sh
set -uo pipefail
P=$OUT/next_probe; mkdir -p "$P"
here=bench/results/2026-11-30-h200-e
build=$PWD/build-gpu
export LD_LIBRARY_PATH=$build/opencv/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
[[ -d /tmp/jpeg ]] || "$build/rn50" make-sample --out /tmp/jpeg --classes 16 --per-class 800 --val-per-class 8 --size 375 \
  > "$P/make_jpeg.log" 2>&1
cp "$build/rn50" /tmp/rn50_base
for variant in copies tiles; do
  patch=$here/next_$([[ $variant == copies ]] && echo copies_on_decode_stream || echo crop_tiles).patch.txt
  git apply "$patch" || { echo "$variant: patch does not apply"; continue; }
  cmake --build "$build" --target rn50 rn50_cuda_tests > "$P/build_$variant.log" 2>&1 || tail -20 "$P/build_$variant.log"
  git apply -R "$patch"
  "$build/tests/rn50_cuda_tests" --gtest_filter='GpuDecode*:GeneratedJpegs*' > "$P/gpu_decode_tests_$variant.log" 2>&1
  echo "$variant: GPU decode tests exit $?"; grep -E "FAILED  \]|PASSED" "$P/gpu_decode_tests_$variant.log"
  cp "$build/rn50" "/tmp/rn50_$variant"
done
cmake --build "$build" --target rn50 rn50_cuda_tests > "$P/build_back.log" 2>&1  # the committed code again
for v in base copies tiles; do
  "/tmp/rn50_$v" bench-decode --decode gpu --data-root /tmp/jpeg/train --files 512 --seconds 4 > "$P/bench_decode_$v.txt" 2>&1
  echo "$v: $(grep -E '^train|crop kernel' "$P/bench_decode_$v.txt" | tr '\n' ' ')"
done
run() {  # name, binary, extra args
  rm -rf "/tmp/runs/$1"
  "$2" train --config configs/optimized.yaml --device cuda:0 --epochs 5 --warmup-epochs 0 \
    --log-every 100000 --validate=off --out-dir "/tmp/runs/$1" "${@:3}" > "$P/$1.log" 2>&1 || tail -3 "$P/$1.log"
  cp "/tmp/runs/$1/metrics.jsonl" "$P/$1.jsonl"
}
for rep in $(seq "${REPS:-2}"); do  # about 100 s a repeat; the builds and tests before them about 250 s
  for v in base copies tiles; do run "${v}_$rep" "/tmp/rn50_$v" --data-root /tmp/jpeg --decode gpu; done
  run "synthetic_$rep" /tmp/rn50_base --data synthetic --synthetic-images 12800
done
python3 - "$P" <<'PY'
import glob, json, os, statistics, sys
rates = {}
for name in ("base", "copies", "tiles", "synthetic"):
    rs = [r for f in sorted(glob.glob(os.path.join(sys.argv[1], name + "_[0-9].jsonl")))
          for r in map(json.loads, open(f)) if r.get("type") == "epoch" and r["epoch"] >= 4]
    if not rs: continue
    rates[name] = statistics.mean(r["images_per_s"] for r in rs)
    ms = lambda k: 1e3 * statistics.mean(r.get(k) or 0 for r in rs)
    print(f"{name:10s} epochs 4-5 {[round(r['images_per_s']) for r in rs]}  between {ms('between_steps_s'):.1f} ms"
          f"  slowest call {ms('gpu_decode_slowest_hardware_call_s'):.1f} ms  crop {ms('gpu_decode_crop_s'):.1f} ms")
syn = rates.get("synthetic")
for name in ("base", "copies", "tiles"):
    if syn and name in rates: print(f"{name:10s} {100 * (1 - rates[name] / syn):.1f}% below synthetic (goal 3%)")
PY
