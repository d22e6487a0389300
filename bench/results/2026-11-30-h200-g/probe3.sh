#!/usr/bin/env bash
# 2026-11-30 (g), call 3: which batches make nvJPEG's call slow (the same 13 of the last 100 batches in every run of
# call 2): each call's bytes and pixels, nvJPEG's allocations during it (trace patch probe3.patch.txt), and the
# same run with larger nvJPEG memory padding (RN50_PAD_DEV_MB / RN50_PAD_PIN_MB, 16 and 8 by default).
# Run from the repository root after
#   RN50_BUILD_TARGETS="rn50" STAGES="build" bench/gpu_session.sh
# as: OUT=$OUT timeout 400 bash bench/results/2026-11-30-h200-g/probe3.sh
set -uo pipefail
P=$OUT/probe; mkdir -p "$P"
build=$PWD/build-gpu
export LD_LIBRARY_PATH=$build/opencv/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
[[ -d /tmp/jpeg ]] || "$build/rn50" make-sample --out /tmp/jpeg --classes 16 --per-class 800 --val-per-class 8 --size 375 \
  > "$P/make_jpeg.log" 2>&1
run() {  # name, extra args
  rm -rf "/tmp/runs/$1"
  "$build/rn50" train --config configs/optimized.yaml --device cuda:0 --epochs "${EPOCHS:-5}" --warmup-epochs 0 \
    --log-every 100000 --validate=off --out-dir "/tmp/runs/$1" "${@:2}" > "$P/$1.log" 2>&1 || tail -3 "$P/$1.log"
  cp "/tmp/runs/$1/metrics.jsonl" "$P/$1.jsonl"
}
RN50_TRACE=1 RN50_NO_SAMPLER=1 run gpu_pad16 --data-root /tmp/jpeg --decode gpu
RN50_TRACE=1 RN50_NO_SAMPLER=1 RN50_PAD_DEV_MB=512 RN50_PAD_PIN_MB=128 run gpu_pad512 --data-root /tmp/jpeg --decode gpu
RN50_NO_SAMPLER=1 run synthetic --data synthetic --synthetic-images 12800
python3 bench/results/2026-11-30-h200-g/calls.py "$P" | tee "$P/calls_summary.txt"
tar -czf "$OUT/probe.tar.gz" -C "$P" . && rm -rf "$P"
