#!/usr/bin/env bash
# The calls of 2026-11-30-h200-j.md: the thread-local graph capture on a GPU (the tests that cover it), then
# decode_ahead_batches 2, 3 and 4 with GPU decoding against synthetic data, EPOCHS (5) epochs each, interleaved in
# the order RUNS gives; epochs 4 and later are the measurement. NOISE=20 (default): ImageNet-sized files
# (make-sample --noise 20), NOISE=0: make-sample's default 35 KiB files. TESTS="cuda e2e" (default) picks the test
# binaries run first ("dp": the two-rank tests, on the two-GPU machine). A run named dp2_ahead<N>_<rep> trains on
# two GPUs (rn50 launch --nproc 2), three epochs. Logs packed into $OUT/logs.tar.gz; a table last.
set -uo pipefail
OUT=${OUT:-/tmp/out}; logs=/tmp/ahead-logs; mkdir -p "$logs"
RUNS=${RUNS:-"ahead3_1 synthetic_1 ahead2_1 ahead4_1 ahead3_2 synthetic_2 ahead3_3 ahead2_2"}
build=$PWD/build-gpu
export LD_LIBRARY_PATH=$build/opencv/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
pack() { tar -czf "$OUT/logs.tar.gz" -C "$logs" . 2>/dev/null; }
trap pack EXIT
{ date -u; nvidia-smi; nproc; git log --oneline -1; } > "$logs/machine.txt" 2>&1
TESTS=${TESTS-cuda e2e}
targets="rn50"; for t in $TESTS; do targets+=" rn50_${t}_tests"; done
RN50_OPENCV_DEBS=.debs RN50_TORCH=pip RN50_BUILD_TARGETS="$targets" \
  scripts/build.sh "$build" > "$logs/build.log" 2>&1 || { grep -E "error" "$logs/build.log" | head -20; exit 1; }
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1  # the machine's rules
for t in $TESTS; do
  case $t in
    cuda) "$build/tests/rn50_cuda_tests" --gtest_filter='*Graph*:GpuDecode*:GeneratedJpegs*' > "$logs/cuda_tests.log" 2>&1 ;;
    e2e) "$build/tests/rn50_e2e_tests" --gtest_filter='Cli.GpuDecode*' > "$logs/${t}_tests.log" 2>&1 ;;
    dp) RN50_DP_DEVICE=cuda "$build/tests/rn50_dp_tests" > "$logs/dp_tests.log" 2>&1 ;;
  esac
  echo "rn50_${t}_tests exit $?"; grep -E "^\[  (FAILED|PASSED|SKIPPED) " "$logs/${t}_tests.log"; pack
done
NOISE=${NOISE:-20}; data=/tmp/jpeg_noise$NOISE; noise_args=(); [[ $NOISE != 0 ]] && noise_args=(--noise "$NOISE")
"$build/rn50" make-sample --out "$data" --classes 16 --per-class 800 --val-per-class 8 --size 375 "${noise_args[@]}" \
  > "$logs/make_jpeg.log" 2>&1
n_train=$(find "$data/train" -name '*.JPEG' | wc -l)
run() {  # name: configs/optimized.yaml, EPOCHS epochs; ahead<N>_<rep> decodes on the GPU N batches ahead
  local name=$1 args cmd=("$build/rn50") epochs=${EPOCHS:-5} device=cuda:0
  case $name in
    synthetic_*) args=(--data synthetic --synthetic-images "$n_train") ;;
    *ahead*) local n=${name#*ahead}; args=(--data-root "$data" --decode gpu --decode-ahead-batches "${n%%_*}") ;;
  esac
  [[ $name == dp2_* ]] && { cmd+=(launch --nproc 2 --); epochs=3; device=cuda; }  # rank k on cuda:k
  rm -rf "/tmp/runs/$name"
  timeout 240 "${cmd[@]}" train --config configs/optimized.yaml --device "$device" --epochs "$epochs" --warmup-epochs 0 \
    --log-every 100000 --validate=off --out-dir "/tmp/runs/$name" "${args[@]}" > "$logs/$name.log" 2>&1 \
    || { echo "$name failed (exit $?):"; tail -3 "$logs/$name.log"; }
  cp "/tmp/runs/$name/metrics.jsonl" "$logs/$name.jsonl" 2>/dev/null; pack
}
for name in $RUNS; do run "$name"; done
python3 - "$logs" <<'PY'
import glob, json, os, statistics, sys
def epochs(f): return [r for r in map(json.loads, open(f)) if r.get("type") == "epoch"]
steady = {}
for f in sorted(glob.glob(os.path.join(sys.argv[1], "*.jsonl"))):
    name = os.path.basename(f)[:-6]; rs = epochs(f)
    print(f"{name:12s} img/s {[round(r['images_per_s']) for r in rs]} input ms {[round(1e3 * r['input_s']) for r in rs]}"
          f" graph {[r.get('cuda_graph') for r in rs]}"
          f" slowest call ms {[round(1e3 * (r.get('gpu_decode_slowest_hardware_call_s') or 0)) for r in rs]}")
    if not name.startswith("dp2_"):
        steady.setdefault(name.rsplit("_", 1)[0], []).extend(r["images_per_s"] for r in rs if r["epoch"] >= 4)
base = statistics.mean(steady["synthetic"])
for k, v in sorted(steady.items()):
    print(f"{k:10s} epochs 4+: {statistics.mean(v):6.0f} img/s {[round(x) for x in v]}  {100 * (1 - statistics.mean(v) / base):4.1f}% below synthetic")
PY
