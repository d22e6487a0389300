#!/usr/bin/env bash
# bench/gpu_foundation.sh: on a GPU machine: build against pip LibTorch, run the test suite, train the
# generated sample on cuda:0 for two epochs, and time synthetic ResNet-50 steps in three precisions.
# Logs go to $OUT (default /tmp/rn50-out); a short table is printed last.
set -uo pipefail
OUT=${OUT:-/tmp/rn50-out}
mkdir -p "$OUT"
export RN50_OPENCV_DEBS=${RN50_OPENCV_DEBS:-.debs} RN50_TORCH=pip
build=build-gpu
{ nvidia-smi; nproc; } > "$OUT/machine.txt" 2>&1
if ! scripts/build.sh $build > "$OUT/build.log" 2>&1; then tail -40 "$OUT/build.log"; exit 1; fi
grep "rn50:" "$OUT/build.log"
export LD_LIBRARY_PATH=$PWD/$build/opencv/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
(cd $build && ctest -j8 --output-on-failure > "$OUT/ctest.log" 2>&1); grep -E "tests passed|tests failed" "$OUT/ctest.log"
$build/rn50 make-sample --out /tmp/sample --classes 10 --per-class 64 --val-per-class 16 --size 72 > /dev/null 2>&1
$build/rn50 train --config configs/smoke.yaml --data-root /tmp/sample --device cuda:0 --epochs 2 \
  --out-dir /tmp/runs/smoke > "$OUT/smoke.log" 2>&1
echo "smoke exit $?"; grep -E "epoch [0-9]+/" "$OUT/smoke.log"
cp /tmp/runs/smoke/metrics.jsonl "$OUT/smoke_metrics.jsonl" 2>/dev/null
synthetic() {  # name, extra args: two epochs of 40 steps at batch 256; the second epoch is the measurement
  $build/rn50 train --data synthetic --device cuda:0 --batch-size 256 --synthetic-images 10240 --epochs 2 \
    --warmup-epochs 0 --log-every 1000 --out-dir "/tmp/runs/$1" "${@:2}" > "$OUT/$1.log" 2>&1
  printf "%-28s %s\n" "$1" "$(tail -1 /tmp/runs/$1/metrics.jsonl | python3 -c 'import json,sys; r=json.loads(sys.stdin.read()); print(f"{r[\"images_per_s\"]:8.0f} img/s  peak {r[\"peak_gpu_mem_gib\"]:.1f} GiB")')"
}
echo "--- synthetic ResNet-50, batch 256, second epoch of 40 steps ---"
synthetic fp32_tf32_off --tf32=off
synthetic fp32_defaults
synthetic bf16_channels_last --precision bf16 --channels-last --cudnn-benchmark
