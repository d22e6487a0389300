#!/usr/bin/env bash
# 2026-11-30 (e), last call: where the gaps between steps come from. GPU decoding as in gpu_session's gpudecode
# stage (5 epochs), with the slowest nvJPEG hardware call per epoch now recorded; then the same with three decoder
# slots (the host a step further ahead; a patch applied here, reverted after).
set -uo pipefail
P=$OUT/probe2; mkdir -p "$P"
build=$PWD/build-gpu
export RN50_OPENCV_DEBS=.debs RN50_TORCH=pip
export LD_LIBRARY_PATH=$build/opencv/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
RN50_BUILD_TARGETS=rn50 scripts/build.sh "$build" > "$P/build.log" 2>&1 || { tail -20 "$P/build.log"; exit 1; }
"$build/rn50" make-sample --out /tmp/jpeg --classes 16 --per-class 800 --val-per-class 8 --size 375 > "$P/make_jpeg.log" 2>&1
run() {  # name, extra args
  rm -rf "/tmp/runs/$1"
  "$build/rn50" train --config configs/optimized.yaml --data-root /tmp/jpeg --device cuda:0 --epochs 5 --warmup-epochs 0 \
    --log-every 100000 --validate=off --out-dir "/tmp/runs/$1" --decode gpu "${@:2}" > "$P/$1.log" 2>&1 || tail -3 "$P/$1.log"
  cp "/tmp/runs/$1/metrics.jsonl" "$P/$1.jsonl"
}
run gpu_decode_2slots
cp gpu/gpu_decoder.h /tmp/gpu_decoder.h.orig
sed -i 's/static constexpr int kSlots = 2;/static constexpr int kSlots = 3;/' gpu/gpu_decoder.h
grep -c "kSlots = 3" gpu/gpu_decoder.h
cmake --build "$build" --target rn50 > "$P/rebuild_3slots.log" 2>&1 || tail -5 "$P/rebuild_3slots.log"
cp /tmp/gpu_decoder.h.orig gpu/gpu_decoder.h
run gpu_decode_3slots
python3 - "$P" <<'PY'
import glob, json, os, sys
for f in sorted(glob.glob(os.path.join(sys.argv[1], "*.jsonl"))):
    for r in map(json.loads, open(f)):
        if r.get("type") != "epoch": continue
        ms = lambda k: 1e3 * (r.get(k) or 0)
        print(f"{os.path.basename(f)[:-6]:18s} epoch {r['epoch']} {r['images_per_s']:5.0f} img/s  between {ms('between_steps_s'):5.1f}"
              f" (slowest {ms('between_steps_slowest_s'):4.1f})  input {ms('input_s'):4.1f}  hw call mean"
              f" {ms('gpu_decode_hardware_call_s') / 50:4.1f} slowest {ms('gpu_decode_slowest_hardware_call_s'):5.1f}"
              f"  slot waits {ms('gpu_decode_wait_s'):6.1f}")
PY
