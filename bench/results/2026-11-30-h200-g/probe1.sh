#!/usr/bin/env bash
# 2026-11-30 (g), call 1: where nvJPEG's slow batched calls fall. Built with the trace patch (probe1.patch.txt:
# RN50_TRACE=1 prints each hardware call's end time and length, each step's queue time and each NVML sample's
# length; RN50_NO_SAMPLER=1 skips the NVML sampler). Run from the repository root after
#   RN50_BUILD_TARGETS="rn50" STAGES="build" bench/gpu_session.sh
# as: OUT=$OUT timeout 400 bash bench/results/2026-11-30-h200-g/probe1.sh
set -uo pipefail
P=$OUT/probe; mkdir -p "$P"
build=$PWD/build-gpu
export LD_LIBRARY_PATH=$build/opencv/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
[[ -d /tmp/jpeg ]] || "$build/rn50" make-sample --out /tmp/jpeg --classes 16 --per-class 800 --val-per-class 8 --size 375 \
  > "$P/make_jpeg.log" 2>&1
run() {  # name, extra args
  rm -rf "/tmp/runs/$1"
  "$build/rn50" train --config configs/optimized.yaml --device cuda:0 --epochs 5 --warmup-epochs 0 \
    --log-every 100000 --validate=off --out-dir "/tmp/runs/$1" "${@:2}" > "$P/$1.log" 2>&1 || tail -3 "$P/$1.log"
  cp "/tmp/runs/$1/metrics.jsonl" "$P/$1.jsonl"
}
RN50_TRACE=1 run gpu_trace --data-root /tmp/jpeg --decode gpu
RN50_TRACE=1 RN50_NO_SAMPLER=1 run gpu_nosampler --data-root /tmp/jpeg --decode gpu
RN50_TRACE=1 run synthetic --data synthetic --synthetic-images 12800
RN50_TRACE=1 RN50_NO_SAMPLER=1 run synthetic_nosampler --data synthetic --synthetic-images 12800
python3 bench/results/2026-11-30-h200-g/trace.py "$P" | tee "$P/trace_summary.txt"
tar -czf "$OUT/probe.tar.gz" -C "$P" . && rm -rf "$P"
