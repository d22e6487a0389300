#!/usr/bin/env bash
# 2026-11-30 (g), call 2: do nvJPEG's slow calls (a call that lasts until the device has run every step queued
# before it) follow how CUDA maps streams onto hardware queues? GPU decoding trained with the trace patch
# (probe1.patch.txt) under several CUDA_DEVICE_MAX_CONNECTIONS. Run from the repository root after
#   RN50_BUILD_TARGETS="rn50" STAGES="build" bench/gpu_session.sh
# as: OUT=$OUT timeout 400 bash bench/results/2026-11-30-h200-g/probe2.sh
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
for q in ${QUEUES:-32 31 30 24 16}; do
  CUDA_DEVICE_MAX_CONNECTIONS=$q RN50_TRACE=1 RN50_NO_SAMPLER=1 run "gpu_q$q" --data-root /tmp/jpeg --decode gpu
  grep -h "hardware queues\|MAX_CONNECTIONS" "$P/gpu_q$q.log" | head -2
done
RN50_NO_SAMPLER=1 run synthetic --data synthetic --synthetic-images 12800
python3 - "$P" <<'PY' | tee "$P/queues_summary.txt"
import glob, json, os, re, statistics, sys
syn = [r["images_per_s"] for r in map(json.loads, open(os.path.join(sys.argv[1], "synthetic.jsonl")))
       if r.get("type") == "epoch" and r["epoch"] >= 4]
print(f"synthetic epochs 4-5: {[round(x) for x in syn]}")
for f in sorted(glob.glob(os.path.join(sys.argv[1], "gpu_q*.log")), key=lambda f: -int(re.findall(r"q(\d+)", f)[-1])):
    name = os.path.basename(f)[:-4]
    rs = [r for r in map(json.loads, open(f[:-4] + ".jsonl")) if r.get("type") == "epoch" and r["epoch"] >= 4]
    calls = [float(m[1]) for m in re.finditer(r"TRACE call t_end=[\d.]+ seq=\d+ call_ms=([\d.]+)", open(f).read())]
    late = calls[len(calls) * 3 // 5:]  # about epochs 4-5
    rate = statistics.mean(r["images_per_s"] for r in rs) if rs else 0
    print(f"{name:8s} epochs 4-5 {[round(r['images_per_s']) for r in rs]} ({100 * (1 - rate / statistics.mean(syn)):.1f}% below)"
          f" between steps ms {[round(1e3 * r['between_steps_s'], 1) for r in rs]}; calls (last 2/5): median"
          f" {statistics.median(late):.1f} ms, over 40 ms: {sum(c > 40 for c in late)} of {len(late)}")
PY
tar -czf "$OUT/probe.tar.gz" -C "$P" . && rm -rf "$P"
