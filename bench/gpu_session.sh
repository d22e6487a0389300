#!/usr/bin/env bash
# bench/gpu_session.sh: one GPU-machine session: build against pip LibTorch, run every test (the GPU
# tests included), train the generated sample on cuda:0 for two epochs, and time synthetic ResNet-50
# steps in the configurations the Python comparison used. Logs go to $OUT; a short table is printed last.
#   STAGES="build test cudatests dptest dpshared mig smoke synthetic headline graphmem ddp ddptune jpeg ddpjpeg gpudecode datapath hostile ncu curves
#           pinning decodeprobe decodeload doctor baseline ptx roundtrip ablation ports opbench stemab castab stempool ab checkhost
#           plancache searchcold searchab"
#   (default: build test mig smoke synthetic jpeg gpudecode roundtrip; dptest and ddp need the two-GPU machine;
#   gpudecode makes the JPEG files when the jpeg stage did not run; JPEG_NOISE=20: ImageNet-sized files, see $jpeg;
#   GPUDECODE_AHEAD="3": gpudecode also trains with decode_ahead_batches 3; ports: PORTS_MODELS, PORTS_UNFUSED,
#   PORTS_TORCH_MODES; ab: AB_OLD=DIR, another source tree (git archive REV | tar -x -C .ab/old, carried), AB_CONFIGS,
#   AB_REPS: its rn50 builds in the background from the build stage on, and the timed stages wait for it)
set -uo pipefail
FINAL_OUT=${OUT:-/tmp/rn50-out}
OUT=/tmp/rn50-logs  # everything here is packed into $FINAL_OUT/logs.tar.gz at the end
STAGES=${STAGES:-build test mig smoke synthetic jpeg gpudecode roundtrip}
mkdir -p "$OUT" "$FINAL_OUT"
pack() { tar -czf "$FINAL_OUT/logs.tar.gz" -C "$OUT" . 2>/dev/null; }  # after every stage: a killed run keeps its logs
trap pack EXIT
export RN50_OPENCV_DEBS=${RN50_OPENCV_DEBS:-.debs} RN50_TORCH=pip
build=$PWD/build-gpu
# The JPEG files the jpeg, gpudecode, pinning and ddpjpeg stages train on: make-sample's default noise gives 35 KiB
# files; JPEG_NOISE=20 gives ImageNet-sized ones (95 KiB at 500x375, decoded as slowly as bench-decode's own files).
jpeg=/tmp/jpeg${JPEG_NOISE:+_noise$JPEG_NOISE}
export LD_LIBRARY_PATH=$build/opencv/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
has() { [[ " $STAGES " == *" $1 "* ]]; }
make_small_sample() {  # the sample the smoke runs train on
  rm -rf /tmp/sample  # make-sample writes into a new or empty folder only
  "$build/rn50" make-sample --out /tmp/sample --classes 10 --per-class 64 --val-per-class 16 --size 72 > /dev/null 2>&1
}
{ date -u; nvidia-smi; nproc; } > "$OUT/machine.txt" 2>&1
if has build; then
  if ! scripts/build.sh "$build" > "$OUT/build.log" 2>&1; then
    grep -E "error|Error" "$OUT/build.log" | head -30; tail -5 "$OUT/build.log"
    # Once more without nvJPEG, so that the stages that do not need it still run (gpudecode will say so).
    echo "build failed: again with -DRN50_WITH_NVJPEG=OFF"
    export RN50_CMAKE_ARGS="${RN50_CMAKE_ARGS:-} -DRN50_WITH_NVJPEG=OFF"  # the ptx stage's build too
    mv "$OUT/build.log" "$OUT/build_failed.log"  # build.log is the build in use: later stages read its status lines
    scripts/build.sh "$build" > "$OUT/build.log" 2>&1 || { grep -E "error|Error" "$OUT/build.log" | head -30; exit 1; }
  fi
  grep "rn50:" "$OUT/build.log"
fi
if has ab; then  # the other tree's rn50 builds while the stages before ab run (they time nothing)
  debs=$(realpath "$RN50_OPENCV_DEBS")  # resolved here: RN50_OPENCV_DEBS may be relative to this tree or absolute
  (cd "$AB_OLD" && RN50_OPENCV_DEBS=$debs RN50_BUILD_TARGETS=rn50 \
     scripts/build.sh build-gpu > "$OUT/ab_old_build.log" 2>&1) &
  ab_build=$!
fi
ab_built() {  # waits once for that build (timed stages wait first, so that no build shares the CPU with a timing)
  if [[ -n "${ab_build:-}" ]]; then wait "$ab_build"; ab_rc=$?; ab_build=""; fi
  return "${ab_rc:-0}"
}
if has test; then
  # The CPU-only suites (data, MIG/utilisation logic, config, schedule) run in CI; here the rest.
  (cd "$build" && ctest -j8 --output-on-failure --timeout 900 -E "${CTEST_EXCLUDE:-^(JpegCodec|JpegHeader|CropResample|BatchLoader|BatchPool|Transforms|SampleMaker|ImageFolder|DatasetTest|EpochOrder|Mig|UtilisationSampler|CudaUuid|GpuLinks|DeferredReuseMemory|ClockEventReasons|OtherProcesses|Health|Percentile|LrSchedule|Config|Cost|Watchdog|GradientBuckets)}" > "$OUT/ctest.log" 2>&1)
  grep -E "tests passed|tests failed|\*\*\*|Failed  " "$OUT/ctest.log" | head -20
  # Graph-vs-eager differences, printed by the tests themselves (ctest shows output only on failure).
  "$build/tests/rn50_cuda_tests" --gtest_filter='*Graph*:*Fp32*' > "$OUT/graph_tests.log" 2>&1
  grep -E "^\[ diff|FAILED  \]" "$OUT/graph_tests.log"; pack
fi
if has cudatests; then  # only the GPU test binary (the whole suite is the test stage); CUDATESTS_FILTER: a gtest filter
  timeout "${CUDATESTS_TIMEOUT:-1200}" "$build/tests/rn50_cuda_tests" --gtest_filter="${CUDATESTS_FILTER:-*}" > "$OUT/cuda_tests.log" 2>&1
  echo "rn50_cuda_tests exit $?"
  grep -E "^\[ diff|FAILED  \]|PASSED" "$OUT/cuda_tests.log"; pack
fi
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1  # the machine's rules
if has dptest; then  # two ranks against one process (NCCL on two GPUs, shared memory on one); graphed against eager
  RN50_DP_DEVICE=cuda "$build/tests/rn50_dp_tests" > "$OUT/dp_tests.log" 2>&1; echo "rn50_dp_tests (cuda) exit $?"
  grep -E "^\[  (FAILED|PASSED|SKIPPED|     OK) |^\[ diff" "$OUT/dp_tests.log" | grep -v Worker; pack
fi
if has mig; then  # MIG is disabled on these GPUs: the listing and the error path, never a change
  "$build/rn50" train --mig list --device cuda:0 > "$OUT/mig.log" 2>&1; echo "mig list exit $?"; head -3 "$OUT/mig.log"
  "$build/rn50" train --mig 0 --data synthetic --device cuda:0 >> "$OUT/mig.log" 2>&1; echo "mig 0 exit $?"; tail -1 "$OUT/mig.log"
fi
if has smoke; then
  make_small_sample
  "$build/rn50" train --config configs/smoke.yaml --data-root /tmp/sample --device cuda:0 --epochs 2 \
    --out-dir /tmp/runs/smoke > "$OUT/smoke.log" 2>&1
  echo "smoke exit $?"; grep -E "epoch [0-9]+/|cuda_graph|kernels" "$OUT/smoke.log"
  cp /tmp/runs/smoke/metrics.jsonl "$OUT/smoke_metrics.jsonl"; pack
fi
summary() {  # the second (measured) epoch of a run
  python3 - "$1" <<'PY'
import json, sys
r = [json.loads(l) for l in open(sys.argv[1]) if '"type":"epoch"' in l][-1]
f = lambda k: "-" if r.get(k) is None else f"{r[k]:.2f}"
print(f"{r['images_per_s']:8.0f} img/s  alloc {f('peak_gpu_mem_gib')} GiB  reserved {f('peak_gpu_reserved_gib')} GiB"
      f"  fwd+bwd {f('forward_backward_s')} s  opt {f('optimizer_s')} s  input {f('input_s')} s  graph {r.get('cuda_graph')}")
PY
}
epoch_keys() {  # metrics file, key prefixes: those keys of the last epoch record
  python3 - "$@" <<'PY'
import json, sys
r = [json.loads(l) for l in open(sys.argv[1]) if '"type":"epoch"' in l][-1]
print('   ', {k: round(v, 4) if isinstance(v, float) else v for k, v in r.items() if k.startswith(tuple(sys.argv[2:]))})
PY
}
record() {  # run name: its metrics into $OUT and its summary line into the table
  cp "/tmp/runs/$1/metrics.jsonl" "$OUT/$1.jsonl"
  printf "%-34s %s\n" "$1" "$(summary "/tmp/runs/$1/metrics.jsonl")" | tee -a "$OUT/table.txt"
}
jpeg_run() {  # name, extra args: configs/optimized.yaml on $jpeg for EPOCHS (3) epochs; the last is the measurement
  local name=$1
  rm -rf "/tmp/runs/$name" "$OUT/$name.jsonl"  # the trainer appends to a metrics file: no earlier call's epochs
  "$build/rn50" train --config configs/optimized.yaml --data-root "$jpeg" --device cuda:0 --epochs "${EPOCHS:-3}" \
    --warmup-epochs 0 \
    --log-every 100000 --validate=off --out-dir "/tmp/runs/$name" "${@:2}" > "$OUT/$name.log" 2>&1 || tail -3 "$OUT/$name.log"
  record "$name"
}
synthetic() {  # name, batch, steps, extra args: two epochs; the second is the measurement
  local name=$1 batch=$2 steps=$3
  rm -rf "/tmp/runs/$name" "$OUT/$name.jsonl"
  "$build/rn50" train --data synthetic --device cuda:0 --batch-size "$batch" --synthetic-images $((batch * steps)) \
    --epochs 2 --warmup-epochs 0 --log-every 100000 --validate=off --out-dir "/tmp/runs/$name" "${@:4}" > "$OUT/$name.log" 2>&1 \
    || { echo "$name failed"; tail -3 "$OUT/$name.log"; return; }
  record "$name"; pack
}
if has synthetic; then
  echo "--- synthetic ResNet-50 on $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1): second epoch ---"
  synthetic b256_fp32_tf32_off 256 40 --tf32=off
  synthetic b256_fp32_defaults 256 60
  synthetic b256_bf16_cl 256 100 --precision bf16 --channels-last
  synthetic b256_fp16_cl 256 100 --precision fp16 --channels-last
  synthetic b256_fp16_cl_bench 256 100 --precision fp16 --channels-last --cudnn-benchmark
  synthetic b256_fp16_cl_bench_graph 256 100 --precision fp16 --channels-last --cudnn-benchmark --cuda-graph
  synthetic b64_fp16_cl 64 200 --precision fp16 --channels-last
  synthetic b64_fp16_cl_graph 64 200 --precision fp16 --channels-last --cuda-graph
  synthetic b64_fp16_cl_bench_graph 64 200 --precision fp16 --channels-last --cudnn-benchmark --cuda-graph
fi
if has headline; then  # the README's headline: configs/optimized.yaml on synthetic data, 3 epochs (the first dropped),
  # HEADLINE_REPS (2) runs at each of HEADLINE_BATCHES (256), then torch.compile at batch 256 in the same call
  for batch in ${HEADLINE_BATCHES:-256}; do
    for rep in $(seq "${HEADLINE_REPS:-2}"); do
      name=headline_b${batch}_$rep
      rm -rf "/tmp/runs/$name"
      "$build/rn50" train --config configs/optimized.yaml --data synthetic --batch-size "$batch" --epochs 3 \
        --out-dir "/tmp/runs/$name" > "$OUT/$name.log" 2>&1 || { echo "$name failed"; tail -3 "$OUT/$name.log"; continue; }
      cp "/tmp/runs/$name/metrics.jsonl" "$OUT/$name.jsonl"
      python3 - "$OUT/$name.jsonl" "$name" <<'PY' | tee -a "$OUT/table.txt"
import json, sys
r = [json.loads(l) for l in open(sys.argv[1]) if '"type":"epoch"' in l][1:]
ips = [e["images_per_s"] for e in r]
tensor = [e.get("tensor_util_pct_mean") for e in r]
print(f"{sys.argv[2]:<34} {sum(ips) / len(ips):8.1f} img/s (epochs 2+: {', '.join(f'{x:.1f}' for x in ips)})"
      f"  reserved {max(e.get('peak_gpu_reserved_gib') or 0 for e in r):.2f} GiB  tensor {tensor[-1]}")
PY
      pack
    done
  done
  if [[ ${HEADLINE_COMPILE:-1} == 1 ]]; then
    python3 bench/torch_reference.py --modes compile --batch 256 --zero-grad none > "$OUT/headline_compile.log" 2>&1 \
      || tail -3 "$OUT/headline_compile.log"
    grep '"images_per_s"' "$OUT/headline_compile.log" | tail -1 | python3 -c "import json, sys
r = json.loads(sys.stdin.read())
print('%-34s %8.1f img/s' % ('torch_compile_b256', r['images_per_s']))" | tee -a "$OUT/table.txt"
    pack
  fi
fi
if has graphmem; then  # peak memory of the graphed runs (the cache is emptied after capture)
  synthetic b256_fp16_cl_bench_graph 256 100 --precision fp16 --channels-last --cudnn-benchmark --cuda-graph
  synthetic b64_fp16_cl_graph 64 200 --precision fp16 --channels-last --cuda-graph
fi
launched() {  # name, processes, train args: one `rn50 launch` run with its summary and the keys that explain it
  local name=$1 n=$2 start=$SECONDS
  rm -rf "/tmp/runs/$name"  # no earlier call's numbers in this summary, nor its checkpoints (a fresh run is refused)
  # A bound on the whole run: a hang at exit (seen once, in ProcessGroupNCCL's destructor) shows as exit 124.
  timeout 240 "$build/rn50" launch --nproc "$n" -- train --device cuda --warmup-epochs 0 --log-every 100000 \
    --validate=off --out-dir "/tmp/runs/$name" "${@:3}" > "$OUT/$name.log" 2>&1 \
    || { echo "$name failed (exit $?, after $((SECONDS - start)) s)"; tail -3 "$OUT/$name.log"
         [[ -s "/tmp/runs/$name/metrics.jsonl" ]] || return; }  # a hang at exit still leaves its measurements
  echo "$name: whole run, start to exit of every process: $((SECONDS - start)) s" | tee -a "$OUT/table.txt"
  record "$name"
  epoch_keys "/tmp/runs/$name/metrics.jsonl" communication data_wait forward gpu_util sm_util gpu_decode_hardware_call \
    | tee -a "$OUT/table.txt"
  pack
}
ddp() {  # name, processes, extra args: synthetic batch 256 per GPU, 100 steps per rank per epoch, two epochs
  launched "$1" "$2" --data synthetic --batch-size 256 --synthetic-images $((256 * 100 * $2)) --epochs 2 "${@:3}"
}
if has ddp; then  # data-parallel scaling on two GPUs: the same per-GPU work as the one-GPU run
  nvidia-smi topo -m > "$OUT/topo.txt" 2>&1
  fast="--precision fp16 --channels-last --cudnn-benchmark"
  ddp ddp1_fp16_cl_graph 1 $fast --cuda-graph
  ddp ddp2_fp16_cl_graph 2 $fast --cuda-graph
  ddp ddp2_fp16_cl_graph_nvlink_off 2 $fast --cuda-graph --nvlink=off
  ddp ddp2_fp16_cl_graph_bucket10 2 $fast --cuda-graph --bucket-mb 10
  ddp ddp1_fp16_cl_eager 1 $fast
  ddp ddp2_fp16_cl_eager 2 $fast
  # configs/optimized.yaml as it is (fusion: conv, CUDA graph), and with fusion: bn: one GPU against two
  for f in conv bn; do
    ddp ddp1_optimized_$f 1 --config configs/optimized.yaml --fusion $f
    ddp ddp2_optimized_$f 2 --config configs/optimized.yaml --fusion $f
  done
  # convergence on the sample: two GPUs at batch 64 each against the smoke stage's one GPU at 128
  make_small_sample
  timeout 240 "$build/rn50" launch --nproc 2 -- train --config configs/smoke.yaml --data-root /tmp/sample --device cuda --epochs 2 \
    --batch-size $(( $(grep -E "^batch_size:" configs/smoke.yaml | awk '{print $2}') / 2 )) --out-dir /tmp/runs/smoke2 > "$OUT/smoke2.log" 2>&1
  echo "smoke on 2 GPUs exit $?"; grep -E "epoch [0-9]+/|data parallel|gpu links" "$OUT/smoke2.log"; pack
fi
if has dpshared; then  # two processes sharing the one GPU (shared-memory all-reduce, eager), each fusion, against one
  for f in ${DPSHARED_FUSIONS:-conv bn}; do
    ddp shared1_optimized_$f 1 --config configs/optimized.yaml --fusion $f --cuda-graph=off
    ddp shared2_optimized_$f 2 --config configs/optimized.yaml --fusion $f
    grep -hE "data parallel|cuda_graph|cuda graph" "$OUT/shared2_optimized_$f.log" | cut -c1-220 | head -3
  done
fi
if has ddptune; then  # what NCCL's share of the SMs costs the overlapped backward: fewer CTAs, larger buckets
  fast="--precision fp16 --channels-last --cudnn-benchmark --cuda-graph"
  for ctas in 2 4 8; do NCCL_MAX_CTAS=$ctas ddp ddp2_graph_nccl_max_ctas_$ctas 2 $fast; done
  ddp ddp2_graph_bucket50 2 $fast --bucket-mb 50
  ddp ddp1_graph_again 1 $fast
fi
make_jpeg_files() {  # JPEG_PER_CLASS x 16 files into $jpeg: 800 gives 50 steps of 256 per epoch (200 gave 12: too short to time)
  rm -rf "$jpeg"
  "$build/rn50" make-sample --out "$jpeg" --classes 16 --per-class "${JPEG_PER_CLASS:-800}" --val-per-class 8 --size 375 \
    --noise "${JPEG_NOISE:-0}" \
    > "$OUT/make_jpeg.log" 2>&1
}
if has jpeg; then  # the full pipeline on generated JPEGs: decode threads, pinned buffers, copy stream
  make_jpeg_files
  du -sh "$jpeg"/train | tee -a "$OUT/table.txt"
  jpeg_run jpeg_optimized
  epoch_keys /tmp/runs/jpeg_optimized/metrics.jsonl data_wait h2d gpu_util sm_util tensor_util power | tee -a "$OUT/table.txt"
  pack
fi
if has ddpjpeg; then  # the fastest configuration on JPEG files, one GPU against two (at the number of GPUs lent)
  [[ -d "$jpeg" ]] || echo "ddpjpeg: no $jpeg (the jpeg stage makes it)"
  for n in 1 2; do
    for decode in cpu gpu; do
      launched ddp${n}_jpeg_decode_$decode $n --config configs/optimized.yaml --data-root "$jpeg" --epochs 3 \
        --decode $decode
    done
  done
  pack
fi
if has gpudecode; then  # decode: gpu (nvJPEG): its tests with their measured differences, the decode rate, training
  grep -q "nvJPEG found" "$OUT/build.log" 2>/dev/null || echo "gpudecode: the build log says no nvJPEG"
  # GPUDECODE_BENCH=0: only the training runs (no tests, no bench-decode); GPUDECODE_YUV=0: no planar run.
  if [[ ${GPUDECODE_BENCH:-1} == 1 ]]; then
    "$build/tests/rn50_cuda_tests" --gtest_filter='GpuDecode*:GeneratedJpegs*' > "$OUT/gpu_decode_tests.log" 2>&1
    grep -E "^\[ measured|FAILED  \]|PASSED" "$OUT/gpu_decode_tests.log" | tail -40
    "$build/rn50" bench-decode --decode gpu --seconds 5 2>&1 | tee "$OUT/bench_decode_gpu.txt"
    "$build/rn50" bench-decode --decode gpu --decode-yuv --seconds 5 2>&1 | tee "$OUT/bench_decode_gpu_yuv.txt"
    "$build/rn50" bench-decode --seconds 3 --pin 2>&1 | tee "$OUT/bench_decode_cpu.txt"  # --pin: pinned threads too
  fi
  [[ -d "$jpeg" ]] || make_jpeg_files  # the jpeg stage's files, made here when that stage did not run
  if [[ -d "$jpeg" ]]; then
    if [[ ${GPUDECODE_BENCH:-1} == 1 ]]; then
      "$build/rn50" bench-decode --decode gpu --data-root "$jpeg"/train --files 512 --seconds 5 2>&1 \
        | tee -a "$OUT/bench_decode_gpu.txt"
      "$build/rn50" bench-decode --decode gpu --decode-yuv --data-root "$jpeg"/train --files 512 --seconds 5 2>&1 \
        | tee -a "$OUT/bench_decode_gpu_yuv.txt"
    fi
    # Against the same configuration and steps on synthetic data, in the same session: what "within 3%" compares.
    # Five epochs each, interleaved, GPUDECODE_REPS (2) times: GPU decoding gets faster over a run's first epochs, so the steady
    # epochs (4 and 5) are compared (docs/gpu-decoding.md).
    n_train=$(find "$jpeg"/train -name '*.JPEG' | wc -l)
    for rep in $(seq "${GPUDECODE_REPS:-2}"); do
      EPOCHS=5 jpeg_run gpu_decode_$rep --decode gpu
      # YCbCr planes converted in rn50's kernel: 1.0-1.6 points further below synthetic data than RGB (bench/results/2026-11-30-gpu-decode-yuv.md)
      [[ $rep == 1 && ${GPUDECODE_YUV:-1} == 1 ]] && EPOCHS=5 jpeg_run gpu_decode_yuv_$rep --decode gpu --decode-yuv=on
      EPOCHS=5 jpeg_run cpu_decode_$rep --decode cpu  # the CPU path on every core, for comparison
      # GPUDECODE_AHEAD="3 4": GPU decoding again with that many batches submitted ahead (decode_ahead_batches)
      for n in ${GPUDECODE_AHEAD:-}; do EPOCHS=5 jpeg_run "gpu_decode_ahead${n}_$rep" --decode gpu --decode-ahead-batches "$n"; done
      rm -rf "/tmp/runs/synthetic_$rep" "$OUT/synthetic_$rep.jsonl"
      "$build/rn50" train --config configs/optimized.yaml --data synthetic --synthetic-images "$n_train" \
        --device cuda:0 --epochs 5 --warmup-epochs 0 --log-every 100000 --validate=off \
        --out-dir "/tmp/runs/synthetic_$rep" > "$OUT/synthetic_$rep.log" 2>&1 || tail -3 "$OUT/synthetic_$rep.log"
      record "synthetic_$rep"
    done
    grep -E "\(decode\)" "$OUT/gpu_decode_1.log"
    if [[ -f /tmp/runs/gpu_decode_yuv_1/metrics.jsonl ]]; then
      grep -E "\(decode\)" "$OUT/gpu_decode_yuv_1.log"
      epoch_keys /tmp/runs/gpu_decode_yuv_1/metrics.jsonl input_s gpu_decode_h gpu_decode_crop gpu_decode_new | tee -a "$OUT/table.txt"
    fi
    # The training thread's waits in finish_into (for the decode thread, for the device) and nvJPEG's slowest call
    epoch_keys /tmp/runs/gpu_decode_1/metrics.jsonl between_steps gpu_decode_batch gpu_decode_pace gpu_decode_slowest \
      gpu_decode_wait | tee -a "$OUT/table.txt"
    # NVML's GPM metrics: DRAM bandwidth came back NaN in some runs (docs/utilisation.md)
    for run in gpu_decode_1 synthetic_1; do epoch_keys "/tmp/runs/$run/metrics.jsonl" sm_util dram_bw; done \
      | tee -a "$OUT/table.txt"
    grep -h "non-finite" "$OUT"/gpu_decode_*.log "$OUT"/synthetic_*.log | sort | uniq -c | grep . || echo "no non-finite warnings"
    python3 - "$OUT" <<'PY' | tee -a "$OUT/table.txt"
import glob, json, os, statistics, sys
def steady(name, records=False):  # images/s (or the records) of epochs 4 and 5 of each run
    out = []
    for f in sorted(glob.glob(os.path.join(sys.argv[1], name + "_[0-9].jsonl"))):
        out += [r if records else r["images_per_s"]
                for r in map(json.loads, open(f)) if r.get("type") == "epoch" and r["epoch"] >= 4]
    return out
base = steady("synthetic")
names = sorted({os.path.basename(f)[:-8] for f in glob.glob(os.path.join(sys.argv[1], "*_[0-9].jsonl"))})
for name in names:
    v = steady(name)
    if not v or not base:
        print(f"{name}: no epochs 4-5"); continue
    below = 100 * (1 - statistics.mean(v) / statistics.mean(base))
    print(f"{name:17s} epochs 4-5: {statistics.mean(v):6.0f} img/s {[round(x) for x in v]}  {below:4.1f}% below synthetic (goal 3%)")
# Where each epoch's time goes (ms, mean of epochs 4-5): the phases from events, and the rest of the wall time.
keys = ("forward_backward_s", "optimizer_s", "input_s", "between_steps_s")
print(f"{'ms per epoch':17s} {'wall':>7s} " + " ".join(f"{k[:-2]:>17s}" for k in keys) + "   rest  slowest input/between")
for name in names:
    rs = steady(name, records=True)
    if not rs: continue
    m = lambda k: 1e3 * statistics.mean(r.get(k) or 0 for r in rs)
    rest = m("wall_s") - sum(m(k) for k in keys)
    print(f"{name:17s} {m('wall_s'):7.1f} " + " ".join(f"{m(k):17.1f}" for k in keys) +
          f" {rest:6.1f}  {m('input_slowest_step_s'):.1f}/{m('between_steps_slowest_s'):.1f}")
PY
  else
    echo "gpudecode: no $jpeg (the jpeg stage makes it): no training run"
  fi
  pack
fi
if has datapath; then  # JPEG training at the fused speed on 16 cores and on 8 (taskset: an instance with 8 cores a GPU),
  # CPU and GPU decoding and both at once (decode_cpu_share: auto), against synthetic data of the same steps, and the doctor's verdict on each core count: epochs
  # of 200 steps of 256 (DATAPATH_COPIES x 12,800 ImageNet-sized files: the copies are hard links, decoded again each
  # time; what is measured is the rate, not what is learnt). DATAPATH_RUNS picks runs (default every one: synthetic
  # cpu16 gpu16 cpu8 gpu8 share8 share16 gpu8x2, about 50 s each; share8x2, gpu8ws and share8ws on request; x2: gpu_decoders 2;
  # ws: wgrad_stream on, the side stream that auto leaves out beside decode: gpu), so that
  # the stage fits one call beside a build;
  # DATAPATH_DOCTOR_CORES the doctor's core sets (default "0-15 0-7"; empty: none).
  dp=/tmp/datapath
  dp_runs=" ${DATAPATH_RUNS:-synthetic cpu16 gpu16 cpu8 gpu8 share8 share16 gpu8x2} "
  if [[ ! -d $dp/train ]]; then
    rm -rf /tmp/datapath_one
    "$build/rn50" make-sample --out /tmp/datapath_one --classes 16 --per-class 800 --val-per-class 1 --size 375 \
      --noise 20 > "$OUT/make_datapath.log" 2>&1 || tail -3 "$OUT/make_datapath.log"
    mkdir -p "$dp/train" "$dp/val"
    for c in $(seq "${DATAPATH_COPIES:-4}"); do
      for d in /tmp/datapath_one/train/*/; do cp -al "$d" "$dp/train/$(basename "$d")_$c"; done
      for d in /tmp/datapath_one/val/*/; do cp -al "$d" "$dp/val/$(basename "$d")_$c"; done
    done
  fi
  echo "datapath: $(find "$dp/train" -name '*.JPEG' | wc -l) files, $(du -sh /tmp/datapath_one/train | cut -f1) once" \
    | tee -a "$OUT/table.txt"
  n_dp=$(find "$dp/train" -name '*.JPEG' | wc -l)
  dprun() {  # name, cores (taskset), train args: 4 epochs, the first not measured
    local name=$1 cores=$2 short=${1#dp_}
    [[ $dp_runs == *" ${short%_*} "* ]] || return 0
    rm -rf "/tmp/runs/$name" "$OUT/$name.jsonl"
    taskset -c "$cores" "$build/rn50" train --config configs/optimized.yaml --device cuda:0 --epochs 4 --warmup-epochs 0 \
      --log-every 100000 --validate=off --checkpoint=off --out-dir "/tmp/runs/$name" "${@:3}" > "$OUT/$name.log" 2>&1 \
      || tail -3 "$OUT/$name.log"
    cp "/tmp/runs/$name/metrics.jsonl" "$OUT/$name.jsonl" 2>/dev/null
  }
  for rep in $(seq "${DATAPATH_REPS:-1}"); do
    dprun dp_synthetic_$rep 0-15 --data synthetic --synthetic-images "$n_dp"
    dprun dp_cpu16_$rep 0-15 --data-root "$dp" --decode cpu
    dprun dp_gpu16_$rep 0-15 --data-root "$dp" --decode gpu
    dprun dp_cpu8_$rep 0-7 --data-root "$dp" --decode cpu
    dprun dp_gpu8_$rep 0-7 --data-root "$dp" --decode gpu
    # Both decoders at once: the decode threads decode what they can keep ahead of, nvJPEG the rest.
    dprun dp_share8_$rep 0-7 --data-root "$dp" --decode gpu --decode-cpu-share auto
    dprun dp_share16_$rep 0-15 --data-root "$dp" --decode gpu --decode-cpu-share auto
    # Two decoders taking the batches in turn: a hardware call lasts until the step beside it ends (gpu-decoding.md).
    dprun dp_gpu8x2_$rep 0-7 --data-root "$dp" --decode gpu --gpu-decoders 2
    dprun dp_share8x2_$rep 0-7 --data-root "$dp" --decode gpu --decode-cpu-share auto --gpu-decoders 2
    # The weight gradients on the side stream beside nvJPEG (auto puts them in line there: gpu-decoding.md).
    dprun dp_gpu8ws_$rep 0-7 --data-root "$dp" --decode gpu --wgrad-stream=on
    # The same beside the share: nvJPEG then decodes about half the images, so its held calls may still keep up.
    dprun dp_share8ws_$rep 0-7 --data-root "$dp" --decode gpu --decode-cpu-share auto --wgrad-stream=on
  done
  for cores in ${DATAPATH_DOCTOR_CORES-0-15 0-7}; do  # DATAPATH_DOCTOR_CORES="": no doctor runs
    taskset -c $cores "$build/rn50" doctor --json --data-root "$dp" > "$OUT/dp_doctor_$cores.json" 2> "$OUT/dp_doctor_$cores.err"
    python3 -c "import json, sys
for r in json.load(open(sys.argv[1])):
    if r['section'] in ('cpu', 'compute', 'verdict') or 'decode' in r['check']:
        print(sys.argv[2], r['check'], '|', r['value'], '|', r['verdict'], '|', r['note'][:400])" \
      "$OUT/dp_doctor_$cores.json" "cores $cores:" | tee -a "$OUT/table.txt"
  done
  python3 - "$OUT" <<'PY' | tee -a "$OUT/table.txt"
import glob, json, os, statistics, sys
def epochs(name):  # the epoch records after the first, every rep
    out = []
    for f in sorted(glob.glob(os.path.join(sys.argv[1], name + "_[0-9].jsonl"))):
        out += [r for r in map(json.loads, open(f)) if r.get("type") == "epoch" and r["epoch"] >= 2]
    return out
def rates(name):
    return [r["images_per_s"] for r in epochs(name)]
base = rates("dp_synthetic")
for name in ["dp_synthetic", "dp_cpu16", "dp_gpu16", "dp_cpu8", "dp_gpu8", "dp_share8", "dp_share16", "dp_gpu8x2",
             "dp_share8x2", "dp_gpu8ws", "dp_share8ws"]:
    v = rates(name)
    if not v or not base:
        print(f"{name}: no measured epochs"); continue
    routes = ["gpu_decode_hardware", "gpu_decode_hybrid", "gpu_decode_cpu_fallback", "gpu_decode_loader_cpu"]
    decoded = sum(r.get(k) or 0 for r in epochs(name) for k in routes)
    loader = sum(r.get("gpu_decode_loader_cpu") or 0 for r in epochs(name))
    share = f", {100 * loader / decoded:4.1f}% decoded by the loader" if decoded else ""
    print(f"{name:13s} {statistics.mean(v):7.0f} img/s {[round(x) for x in v]}  "
          f"{100 * (1 - statistics.mean(v) / statistics.mean(base)):5.1f}% below synthetic (goal 3%){share}")
PY
  pack
fi
if has hostile; then  # a folder with make-sample --damaged against the same folder without: counts and peak memory
  for kind in good mixed; do
    rm -rf "/tmp/hostile_$kind"
    "$build/rn50" make-sample --out "/tmp/hostile_$kind" --classes 8 --per-class 49 --val-per-class 4 --size 375 \
      $([[ $kind == mixed ]] && echo --damaged) > "$OUT/make_hostile_$kind.log" 2>&1 || tail -3 "$OUT/make_hostile_$kind.log"
  done
  for decode in cpu gpu; do
    for kind in good mixed; do
      name=hostile_${decode}_$kind
      rm -rf "/tmp/runs/$name"
      timeout 240 "$build/rn50" train --config configs/optimized.yaml --data-root "/tmp/hostile_$kind" --device cuda:0 \
        --batch-size 56 --epochs 3 --warmup-epochs 0 --validate=off --checkpoint=off --decode "$decode" \
        --log-every 100000 --out-dir "/tmp/runs/$name" > "$OUT/$name.log" 2>&1 || echo "$name: exit $?"
      cp "/tmp/runs/$name/metrics.jsonl" "$OUT/$name.jsonl" 2>/dev/null
      python3 - "/tmp/runs/$name/metrics.jsonl" "$name" <<'PY' | tee -a "$OUT/table.txt"
import json, sys
rs = [json.loads(l) for l in open(sys.argv[1]) if '"type":"epoch"' in l]
g = lambda k: max((r.get(k) or 0) for r in rs)
print(f"{sys.argv[2]:22s} bad {[r.get('bad_samples') for r in rs]}  host RSS {g('peak_host_rss_gib'):.3f} GiB"
      f"  GPU {g('peak_gpu_mem_gib'):.3f} / {g('peak_gpu_reserved_gib'):.3f} GiB")
PY
    done
  done
  for decode in cpu gpu; do  # which files each path counted, and why (a line per file kind and reason)
    echo "decode: $decode"
    grep -h "bad sample skipped" "$OUT/hostile_${decode}_mixed.log" | sed -E 's#^.*bad sample skipped: .*/(damaged_[^/:]*)#\1#' \
      | sed -E 's#class_[0-9]+#class#g' | sort | uniq -c
  done > "$OUT/hostile_reasons.txt"
  pack
fi
if has ncu; then  # step time by kernel class: ncu over eager steps, the last NCU_LAST of NCU_STEPS (default 4 of 10)
  # (NCU_SKIP kernel launches first unprofiled, default 3000)
  # NCU_FUSIONS (default "conv off bn"), NCU_MODELS (default resnet50; the AdamW ports get AdamW as ports_speed.sh);
  # NCU_METRICS: more metrics after the time, e.g. dram__throughput.avg.pct_of_peak_sustained_elapsed (each adds
  # replay passes; the split then prints each class's and kernel's time-weighted rates). The GPU's tensor-pipe metric
  # names are listed into ncu_tensor_metrics.txt first.
  # NCU_METRICS=auto: DRAM throughput and whichever tensor-pipe activity metrics this GPU's ncu lists.
  # NCU_LAYERS=1: a second profile per run, each kernel renamed after its NVTX range (cuda/nvtx.h), split per layer;
  # NCU_LAYERS=only: that profile alone (the kernel-class one skipped, so that the per-layer one fits a call).
  # NCU_TIMEOUT: seconds for each profile (default 300: with NCU_METRICS=auto one took over 140 s on an H100).
  ncu_bin=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
  "$ncu_bin" --query-metrics 2>/dev/null | grep -iE "tensor|dram__throughput" > "$OUT/ncu_tensor_metrics.txt"
  ncu_metrics=${NCU_METRICS:-}
  if [[ $ncu_metrics == auto ]]; then
    ncu_metrics=dram__throughput.avg.pct_of_peak_sustained_elapsed
    for base in sm__pipe_tensor_cycles_active sm__pipe_tensor_op_gmma_cycles_active sm__pipe_tensor_op_hmma_cycles_active; do
      grep -q "^$base " "$OUT/ncu_tensor_metrics.txt" && ncu_metrics+=",$base.avg.pct_of_peak_sustained_active"
    done
    echo "ncu metrics: $ncu_metrics"
  fi
  metrics=gpu__time_duration.sum${ncu_metrics:+,$ncu_metrics}
  # The first step's kernels run unprofiled (NCU_SKIP launches, about 3 of ResNet-50's fused steps): ATen's cuDNN
  # autotuning times its candidates there, and under ncu it chose a stem kernel 4.6x slower (2026-12-06-relu-bits.md).
  ncu_skip=${NCU_SKIP:-3000}
  for m in ${NCU_MODELS:-resnet50}; do
    rm -f "/tmp/ncu-plans-$m.txt"  # this build's choices, never a file an earlier build left
    extra=()
    [[ $m == convnext* || $m == vit* ]] && extra=(--optimizer adamw --lr 0.001 --weight-decay 0.05)
    for f in ${NCU_FUSIONS:-conv off bn}; do
      name=ncu_$f; [[ $m == resnet50 ]] || name=ncu_${m}_$f
      # fusion: conv plans by timing up to 16 cuDNN configurations a pattern and both forms of each prologue: under
      # ncu every one of those kernels is profiled. A run without ncu times them first into a plan cache, and the
      # profiled runs take the choices from it (core/plan_cache.h) and profile only the steps' kernels.
      plans=/tmp/ncu-plans-$m.txt
      if [[ $f == conv && ! -f $plans ]]; then
        "$build/rn50" train --config configs/optimized.yaml --model "$m" --data synthetic --device cuda:0 \
          --synthetic-images 3072 --epochs 1 --warmup-epochs 0 --max-steps 2 --cuda-graph=off --validate=off \
          --checkpoint=off --log-every 100000 --fusion conv --plan-cache "$plans" --out-dir "/tmp/runs/${name}_plans" \
          "${extra[@]}" > "$OUT/${name}_plans.log" 2>&1 || tail -3 "$OUT/${name}_plans.log"
        rm -rf "/tmp/runs/${name}_plans"
      fi
      rm -rf "/tmp/runs/$name"
      if [[ ${NCU_LAYERS:-} != only ]]; then
        timeout "${NCU_TIMEOUT:-300}" "$ncu_bin" --clock-control none --launch-skip "$ncu_skip" --metrics "$metrics" --csv \
          "$build/rn50" train --config configs/optimized.yaml --model "$m" --data synthetic --device cuda:0 \
          --synthetic-images 3072 --epochs 1 --warmup-epochs 0 --max-steps "${NCU_STEPS:-10}" --cuda-graph=off \
          --validate=off --checkpoint=off --log-every 100000 --fusion "$f" --out-dir "/tmp/runs/$name" "${extra[@]}" \
          --plan-cache "$plans" > "$OUT/$name.csv" 2> "$OUT/$name.err" || echo "ncu $m $f: exit $?"
        pack
      fi
      if [[ -n ${NCU_LAYERS:-} ]]; then
        rm -rf "/tmp/runs/$name"
        timeout "${NCU_TIMEOUT:-300}" "$ncu_bin" --clock-control none --launch-skip "$ncu_skip" \
          --metrics gpu__time_duration.sum --csv --nvtx \
          --print-nvtx-rename kernel \
          "$build/rn50" train --config configs/optimized.yaml --model "$m" --data synthetic --device cuda:0 \
          --synthetic-images 3072 --epochs 1 --warmup-epochs 0 --max-steps "${NCU_STEPS:-10}" --cuda-graph=off \
          --validate=off --checkpoint=off --log-every 100000 --fusion "$f" --out-dir "/tmp/runs/$name" "${extra[@]}" \
          --plan-cache "$plans" > "$OUT/layers_$name.csv" 2> "$OUT/layers_$name.err" || echo "ncu layers $m $f: exit $?"
        python3 bench/ncu_kernel_classes.py --last-steps "${NCU_LAST:-4}" --ranges "$OUT/layers_$name.csv" |
          tee "$OUT/ncu_layers_$name.txt"
        pack
      fi
    done
  done
  if [[ ${NCU_LAYERS:-} != only ]]; then
    python3 bench/ncu_kernel_classes.py --last-steps "${NCU_LAST:-4}" --top 25 ${ncu_metrics:+--rates} "$OUT"/ncu_*.csv |
      tee "$OUT/ncu_kernel_classes.txt" | grep -v "^     " | cut -c1-200
  fi
fi
if has curves; then  # fused against unfused training curves of the ports on JPEG files (bench/ports_curves.sh)
  OUT="$OUT" MODELS="${CURVES_MODELS:-vit_b_16 convnext_tiny}" EPOCHS="${CURVES_EPOCHS:-8}" bench/ports_curves.sh \
    > "$OUT/curves.txt" 2>&1
  grep -E "^[a-z]|last-epoch" "$OUT/curves.txt"; pack
fi
if has pinning; then  # pin_workers on and off with CPU decoding: all cores, and 4 (data-bound), interleaved
  [[ -d "$jpeg" ]] || make_jpeg_files
  for rep in 1 2; do
    for workers in 4 16; do
      for pin in off on; do EPOCHS=3 jpeg_run "pin_${pin}_w${workers}_$rep" --workers "$workers" --pin-workers="$pin"; done
    done
  done
  grep -h "pin_workers:" "$OUT"/pin_*.log | sort | uniq -c | grep . || echo "every decode thread pinned"; pack
fi
if has decodeprobe; then  # does nvJPEG's decode overlap a step queued before it? With CUDA's 8 hardware queues or rn50's 32?
  for variant in default connections8 connections1 no_pipeline_connections8; do
    env_args=(); extra=()
    case $variant in
      connections*) env_args=(CUDA_DEVICE_MAX_CONNECTIONS=${variant#connections}) ;;
      no_pipeline_connections8) env_args=(CUDA_DEVICE_MAX_CONNECTIONS=8); extra=(--nvjpeg-no-pipeline) ;;
    esac
    echo "$variant:" | tee -a "$OUT/decode_probe.txt"
    env "${env_args[@]}" "$build/rn50" bench-decode --decode gpu --files 256 --seconds 3 --step-ms 40 "${extra[@]}" 2>&1 \
      | grep -E "train|simulated step|decode queued|host thread" | tee -a "$OUT/decode_probe.txt"
  done
  if [[ -d "$jpeg" ]]; then  # training with CUDA's default queues, as measured before rn50 set 32
    CUDA_DEVICE_MAX_CONNECTIONS=8 jpeg_run jpeg_gpu_decode_connections8 --decode gpu
    epoch_keys /tmp/runs/jpeg_gpu_decode_connections8/metrics.jsonl wall_s gpu_decode_h | tee -a "$OUT/table.txt"
  fi
  pack
fi
if has decodeload; then  # what bounds GPU decoding on 8 cores: the step beside it, the CPU's other work, or neither?
  # DECODELOAD_STEP_MS: the model's step (256 / its images/s); DECODELOAD_CORES; DECODELOAD_THREADS: the CPU load.
  for load in 0 ${DECODELOAD_THREADS:-6}; do
    for step in 0 ${DECODELOAD_STEP_MS:-28.6}; do
      echo "cores ${DECODELOAD_CORES:-0-7}, step ${step} ms, ${load} CPU decode threads:" | tee -a "$OUT/decode_load.txt"
      taskset -c "${DECODELOAD_CORES:-0-7}" "$build/rn50" bench-decode --decode gpu --files 256 --seconds 3 \
        --step-ms "$step" --cpu-load "$load" 2>&1 \
        | grep -E "^train|beside|decode thread|submitted" | tee -a "$OUT/decode_load.txt"
    done
  done
  # ResNet-50's own graphed step and the same eager, against the stand-in above; then the graph without its second
  # stream's branches (what training with decode: gpu and the doctor run since wgrad_stream: auto; 2026-12-06: 35.5 us
  # an image beside it, 132.3 beside the graph with them, 35.9 beside the eager step), and with CUDA's default 8
  # hardware queues.
  for step in "--step-model resnet50" "--step-model resnet50 --step-eager" "--step-model resnet50 --step-wgrad-inline" \
              "queues8 --step-model resnet50"; do
    echo "cores ${DECODELOAD_CORES:-0-7}, $step:" | tee -a "$OUT/decode_load.txt"
    queues=32; [[ $step == queues8* ]] && { queues=8; step=${step#queues8 }; }
    CUDA_DEVICE_MAX_CONNECTIONS=$queues taskset -c "${DECODELOAD_CORES:-0-7}" "$build/rn50" bench-decode --decode gpu \
      --files 256 --seconds 3 $step 2>&1 \
      | grep -E "^beside|^train|decode thread|submitted|hardware calls beside" | tee -a "$OUT/decode_load.txt"
  done
  # DECODELOAD_OFFSETS="1 2 3 ...": the graph with its branches again, the decoder's streams taken that many pool
  # streams further along, onto other hardware queues: does one offset free nvJPEG's calls with the side stream on?
  for k in ${DECODELOAD_OFFSETS:-}; do
    echo "cores ${DECODELOAD_CORES:-0-7}, --step-model resnet50 --decode-stream-offset $k:" | tee -a "$OUT/decode_load.txt"
    taskset -c "${DECODELOAD_CORES:-0-7}" "$build/rn50" bench-decode --decode gpu --files 256 --seconds 3 \
      --step-model resnet50 --decode-stream-offset "$k" 2>&1 | grep -E "hardware calls beside|rror" \
      | tee -a "$OUT/decode_load.txt"
  done
  cat "$OUT/decode_load.txt" >> "$OUT/table.txt"
  pack
fi
if has doctor; then  # the instance check, table and JSON (after the other tree's build: it times the CPU)
  ab_built || true
  "$build/rn50" doctor > "$OUT/doctor.txt" 2>&1; echo "doctor exit $?"; cat "$OUT/doctor.txt"
  "$build/rn50" doctor --json > "$OUT/doctor.json" 2> "$OUT/doctor_json.err"; echo "doctor --json exit $?"; pack
fi
if has baseline; then  # configs/baseline.yaml (true FP32, every switch off) and optimized.yaml, synthetic and JPEG
  for cfg in baseline optimized; do
    "$build/rn50" train --config configs/$cfg.yaml --data synthetic --synthetic-images 5120 --device cuda:0 --epochs 2 \
      --warmup-epochs 0 --log-every 100000 --validate=off --out-dir /tmp/runs/config_$cfg > "$OUT/config_$cfg.log" 2>&1 \
      || tail -3 "$OUT/config_$cfg.log"
    printf "%-34s %s\n" "config_${cfg}_synthetic" "$(summary /tmp/runs/config_$cfg/metrics.jsonl)" | tee -a "$OUT/table.txt"
  done
  if [[ -d "$jpeg" ]]; then
    "$build/rn50" train --config configs/baseline.yaml --data-root "$jpeg" --device cuda:0 --epochs 2 --warmup-epochs 0 \
      --max-steps 10 --log-every 100000 --validate=off --out-dir /tmp/runs/config_baseline_jpeg > "$OUT/config_baseline_jpeg.log" 2>&1 \
      || tail -3 "$OUT/config_baseline_jpeg.log"
    printf "%-34s %s\n" config_baseline_jpeg "$(summary /tmp/runs/config_baseline_jpeg/metrics.jsonl)" | tee -a "$OUT/table.txt"
  fi
  pack
fi
if has ptx; then  # RN50_CUDA_ARCHS=ptx: rn50's own kernels as PTX only, compiled by the driver at start
  RN50_CMAKE_ARGS="${RN50_CMAKE_ARGS:-} -DRN50_CUDA_ARCHS=ptx" RN50_BUILD_TARGETS=rn50 scripts/build.sh "$build-ptx" \
    > "$OUT/build_ptx.log" 2>&1 || { grep -E "error" "$OUT/build_ptx.log" | head; }
  grep "own CUDA kernels" "$OUT/build_ptx.log"
  LD_LIBRARY_PATH=$build-ptx/opencv/usr/lib/x86_64-linux-gnu:$LD_LIBRARY_PATH "$build-ptx/rn50" train --data synthetic \
    --device cuda:0 --batch-size 256 --synthetic-images 25600 --epochs 2 --warmup-epochs 0 --log-every 100000 --validate=off \
    --precision fp16 --channels-last --cudnn-benchmark --cuda-graph --out-dir /tmp/runs/ptx > "$OUT/ptx.log" 2>&1 || tail -3 "$OUT/ptx.log"
  grep -E "kernels|compute capability" "$OUT/ptx.log" | head -3
  printf "%-34s %s\n" ptx_fp16_cl_bench_graph "$(summary /tmp/runs/ptx/metrics.jsonl)" | tee -a "$OUT/table.txt"
  pack
fi
if has roundtrip; then  # weights against torchvision, both directions: ResNet-50 and the ports (the GPU machine has torchvision)
  for arch in resnet50 resnext50_32x4d convnext_tiny vit_b_16 efficientnet_b0; do
    python3 tests/tools/check_torchvision_roundtrip.py "$build/rn50" "/tmp/roundtrip-$arch" --arch "$arch" --device cuda:0 2>&1 |
      tee -a "$OUT/roundtrip.md"
  done
  pack
fi
if has ablation; then
  python3 bench/ablation.py --rn50 "$build/rn50" --out "$OUT/ablation" --work /tmp/ablation 2>&1 | tee "$OUT/ablation.txt"
  pack
fi
if has ports; then  # the model ports against PyTorch in this call (bench/ports_speed.sh on this build; PORTS_* pass on)
  ab_built
  OUT="$OUT" SKIP_BUILD=1 STAGES="rn50 torch" MODELS="${PORTS_MODELS:-vit_b_16 convnext_tiny}" \
    UNFUSED="${PORTS_UNFUSED:-vit_b_16 convnext_tiny}" TORCH_MODES="${PORTS_TORCH_MODES:-compile}" \
    bench/ports_speed.sh > "$OUT/ports.txt" 2>&1
  tail -12 "$OUT/ports.txt"; pack
fi
if has opbench; then  # rn50's own ops against ATen's, kernel by kernel (the binaries the build stage made)
  ab_built
  for b in "$build"/bench/rn50_bench_max_pool "$build"/bench/rn50_bench_stem; do
    [[ -x $b ]] && "$b" 2>&1 | tee -a "$OUT/opbench.txt"
  done; pack
fi
if has stemab; then  # stem_channels in training, one build: 3 (the image's) against STEM_CHANNELS (8), synthetic data
  ab_built || true  # the other tree's background build (stage ab) would share the CPU with the timed runs
  OUT="$OUT/stemab" OLD="$PWD" SKIP_BUILD=1 CONFIGS=synthetic REPS="${AB_REPS:-2}" \
    NEW_ARGS="--stem-channels=${STEM_CHANNELS:-8}" OLD_ARGS="--stem-channels=3" bench/ab_speed.sh > "$OUT/stemab.txt" 2>&1
  tail -4 "$OUT/stemab.txt"; pack
fi
if has castab; then  # batched_casts in training, one build: off (a cast per weight) against on, synthetic data
  ab_built || true
  OUT="$OUT/castab" OLD="$PWD" SKIP_BUILD=1 CONFIGS=synthetic REPS="${AB_REPS:-2}" \
    NEW_ARGS="--batched-casts=on" OLD_ARGS="--batched-casts=off" bench/ab_speed.sh > "$OUT/castab.txt" 2>&1
  tail -4 "$OUT/castab.txt"; pack
fi
if has stempool; then  # fuse_stem_pool in training, one build: the stem's BatchNorm+ReLU and max-pool apart against fused
  ab_built || true
  OUT="$OUT/stempool" OLD="$PWD" SKIP_BUILD=1 CONFIGS=synthetic REPS="${AB_REPS:-2}" \
    NEW_ARGS="--fuse-stem-pool=on" OLD_ARGS="--fuse-stem-pool=off" bench/ab_speed.sh > "$OUT/stempool.txt" 2>&1
  tail -4 "$OUT/stempool.txt"; pack
fi
# plan_search in training, one build: heuristics against exhaustive, synthetic data. searchcold: an exhaustive run
# (one epoch) fills a plan file of its own and logs each choice (its first epoch: the search); searchab: both searches
# alternating with their plans from that file (kept in build-gpu between calls), so both sides time only training.
searchplans=$build/searchab-plans.txt
if has searchcold; then
  rm -f "$searchplans"
  timeout "${SEARCHAB_COLD_TIMEOUT:-420}" "$build/rn50" train --config configs/optimized.yaml --data synthetic \
    --epochs 1 --plan-search exhaustive --plan-cache "$searchplans" --out-dir /tmp/runs/searchab_cold \
    > "$OUT/searchab_cold.log" 2>&1
  echo "exhaustive planning run exit $?"
  grep -cE ": plan: engine" "$OUT/searchab_cold.log" | sed 's/^/patterns searched: /'
  grep -cE "this one enumerated" "$OUT/searchab_cold.log" | sed 's/^/won by an enumerated plan: /'
  grep -E "plan cache|epoch 1/1" "$OUT/searchab_cold.log" | tail -3; pack
fi
if has searchab; then
  ab_built || true
  OUT="$OUT/searchab" OLD="$PWD" SKIP_BUILD=1 CONFIGS=synthetic REPS="${AB_REPS:-2}" \
    NEW_ARGS="--plan-search=exhaustive --plan-cache=$searchplans" \
    OLD_ARGS="--plan-search=heuristics --plan-cache=$searchplans" bench/ab_speed.sh > "$OUT/searchab.txt" 2>&1
  tail -4 "$OUT/searchab.txt"; pack
fi
if has ab; then  # this tree against AB_OLD (built in the background since the build stage), AB_CONFIGS (synthetic)
  ab_built || { echo "the old tree's build failed"; tail -5 "$OUT/ab_old_build.log"; }
  OUT="$OUT" OLD="$AB_OLD" SKIP_BUILD=1 CONFIGS="${AB_CONFIGS:-synthetic}" REPS="${AB_REPS:-1}" bench/ab_speed.sh \
    > "$OUT/ab.txt" 2>&1
  tail -4 "$OUT/ab.txt"; pack
fi
if has plancache; then  # fusion: conv's start-up with the plan cache: a run that times every choice and saves them
  # (cold), one that takes them from the file (warm), and one without it (off); configs/optimized.yaml, synthetic data,
  # 3 epochs: the first epoch's seconds (planning, capture) and the later epochs' images/s.
  rm -f /tmp/plancache.txt
  for run in cold warm off; do
    cache=/tmp/plancache.txt; [[ $run == off ]] && cache=off
    rm -rf "/tmp/runs/pc_$run"
    "$build/rn50" train --config configs/optimized.yaml --data synthetic --epochs 3 --out-dir "/tmp/runs/pc_$run" \
      --plan-cache "$cache" > "$OUT/plancache_$run.log" 2>&1 || tail -3 "$OUT/plancache_$run.log"
    python3 -c "import json, sys
r = [json.loads(l) for l in open(sys.argv[1]) if '\"type\":\"epoch\"' in l]
print('plancache', sys.argv[2], 'first epoch %.2f s' % r[0]['wall_s'], 'then', [round(e['images_per_s'], 1) for e in r[1:]])" \
      "/tmp/runs/pc_$run/metrics.jsonl" "$run" | tee -a "$OUT/table.txt"
    grep -E "plan cache" "$OUT/plancache_$run.log" | cut -c1-200 | tee -a "$OUT/table.txt"
  done
  pack
fi
if has checkhost; then  # the GPU image's runtime library set, collected from this pip install and run alone
  readelf -d "$build/rn50" | grep NEEDED > "$OUT/needed.txt"
  timeout 300 scripts/runtime-libs.sh check-host "$build/rn50" /tmp/rn50-runtime > "$OUT/check-host.txt" 2>&1
  echo "check-host exit $?"; grep -E "^(ok|FAIL|skip|note)|PASSED|FAILED" "$OUT/check-host.txt" | cut -c1-150
  cp /tmp/rn50-runtime/libs.txt "$OUT/runtime-libs.txt" 2>/dev/null; pack
fi
