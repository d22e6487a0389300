#!/usr/bin/env bash
# Call 6 of 2026-11-30-h200-i.md: decode_ahead_batches 2 against 3 with GPU decoding on ImageNet-sized files
# (make-sample --noise 20), against synthetic data, five epochs each, interleaved; first the build and the GPU tests
# that cover the change. Logs packed into $OUT/logs.tar.gz; a table last.
set -uo pipefail
OUT=${OUT:-/tmp/out}; logs=/tmp/ahead-logs; mkdir -p "$logs"
build=$PWD/build-gpu
export LD_LIBRARY_PATH=$build/opencv/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
pack() { tar -czf "$OUT/logs.tar.gz" -C "$logs" . 2>/dev/null; }
trap pack EXIT
RN50_OPENCV_DEBS=.debs RN50_TORCH=pip RN50_BUILD_TARGETS="rn50 rn50_cuda_tests rn50_e2e_tests" \
  scripts/build.sh "$build" > "$logs/build.log" 2>&1 || { grep -E "error" "$logs/build.log" | head -20; exit 1; }
"$build/tests/rn50_cuda_tests" --gtest_filter='GpuDecode*:GeneratedJpegs*' > "$logs/cuda_tests.log" 2>&1
echo "rn50_cuda_tests exit $?"; grep -E "^\[  (FAILED|PASSED) " "$logs/cuda_tests.log"
"$build/tests/rn50_e2e_tests" --gtest_filter='Cli.GpuDecode*:Cli.ConfigurationErrors*' > "$logs/e2e.log" 2>&1
echo "rn50_e2e_tests exit $?"; grep -E "^\[  (FAILED|PASSED|SKIPPED) " "$logs/e2e.log"
data=/tmp/jpeg_noise20
"$build/rn50" make-sample --out "$data" --classes 16 --per-class 800 --val-per-class 8 --size 375 --noise 20 \
  > "$logs/make_jpeg.log" 2>&1
n_train=$(find "$data/train" -name '*.JPEG' | wc -l)
run() {  # name, args: configs/optimized.yaml, five epochs
  rm -rf "/tmp/runs/$1"
  "$build/rn50" train --config configs/optimized.yaml --device cuda:0 --epochs 5 --warmup-epochs 0 --log-every 100000 \
    --validate=off --out-dir "/tmp/runs/$1" "${@:2}" > "$logs/$1.log" 2>&1 || tail -3 "$logs/$1.log"
  cp "/tmp/runs/$1/metrics.jsonl" "$logs/$1.jsonl"; pack
}
run ahead2_1 --data-root "$data" --decode gpu --decode-ahead-batches 2
run ahead3_1 --data-root "$data" --decode gpu --decode-ahead-batches 3
run synthetic_1 --data synthetic --synthetic-images "$n_train"
run ahead3_2 --data-root "$data" --decode gpu --decode-ahead-batches 3
run ahead2_2 --data-root "$data" --decode gpu --decode-ahead-batches 2
python3 - "$logs" <<'PY'
import glob, json, os, statistics, sys
def epochs(f): return [r for r in map(json.loads, open(f)) if r.get("type") == "epoch"]
steady = {}
for f in sorted(glob.glob(os.path.join(sys.argv[1], "*.jsonl"))):
    name = os.path.basename(f)[:-6]; rs = epochs(f)
    print(f"{name:12s} img/s {[round(r['images_per_s']) for r in rs]} input ms {[round(1e3 * r['input_s']) for r in rs]}"
          f" fwd+bwd ms {[round(1e3 * r['forward_backward_s']) for r in rs]}"
          f" slowest call ms {[round(1e3 * (r.get('gpu_decode_slowest_hardware_call_s') or 0)) for r in rs]}")
    steady.setdefault(name.rsplit("_", 1)[0], []).extend(r["images_per_s"] for r in rs if r["epoch"] >= 4)
base = statistics.mean(steady["synthetic"])
for k, v in steady.items():
    print(f"{k:10s} epochs 4-5: {statistics.mean(v):6.0f} img/s {[round(x) for x in v]}  {100 * (1 - statistics.mean(v) / base):4.1f}% below synthetic")
PY
