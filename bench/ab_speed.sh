#!/usr/bin/env bash
# bench/ab_speed.sh: training speed of this tree against another source tree (an earlier revision), side by side on
# one GPU machine: builds both, makes ImageNet-sized JPEG files, then trains the same configurations with each,
# alternating, and prints images/s per configuration and the difference.
#   OLD=DIR       the other tree (e.g. git archive REV | tar -x -C .ab/old; carry .ab to the GPU machine)
#   CONFIGS="synthetic cpu gpu"   synthetic: configs/optimized.yaml on synthetic data; cpu / gpu: on the JPEG files
#                 with decode: cpu / gpu
#   REPS=1        repetitions of the whole matrix; EPOCHS_SYNTHETIC=3, EPOCHS_JPEG=4: the first epoch is not measured
#   NEW_ARGS / OLD_ARGS   extra train options for one side only. Each side reads its own tree's
#                 configs/optimized.yaml; against a tree from before fusion and expandable segments, compare the code
#                 alone with NEW_ARGS="--fusion=off --expandable-segments=off"
#   SKIP_BUILD=1  reuse build-gpu and $OLD/build-gpu
# Output: $OUT/ab_table.txt (the table) and every run's log and metrics under $OUT/ab/.
set -uo pipefail
OUT=${OUT:-/tmp/rn50-out}
OLD=${OLD:?set OLD to the other source tree}
OLD=$(realpath "$OLD")
CONFIGS=${CONFIGS:-synthetic cpu gpu}
REPS=${REPS:-1}
export RN50_TORCH=pip RN50_OPENCV_DEBS=$(realpath "${RN50_OPENCV_DEBS:-.debs}")
new_build=$PWD/build-gpu
old_build=$OLD/build-gpu
logs=$OUT/ab
mkdir -p "$logs"
if [[ -z "${SKIP_BUILD:-}" ]]; then
  jobs=$(( $(nproc) / 2 ))
  RN50_JOBS=$jobs RN50_BUILD_TARGETS=${NEW_TARGETS:-rn50} scripts/build.sh "$new_build" > "$logs/build_new.log" 2>&1 &
  (cd "$OLD" && RN50_JOBS=$jobs RN50_BUILD_TARGETS=rn50 scripts/build.sh "$old_build" > "$logs/build_old.log" 2>&1) &
  wait
fi
for b in "$new_build" "$old_build"; do
  [[ -x "$b/rn50" ]] || { echo "no rn50 in $b"; tail -20 "$logs"/build_*.log; exit 1; }
done
export LD_LIBRARY_PATH=$new_build/opencv/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
jpeg=/tmp/ab_jpeg
if [[ " $CONFIGS " == *" cpu "* || " $CONFIGS " == *" gpu "* ]] && [[ ! -d $jpeg/train ]]; then
  rm -rf "$jpeg"  # a folder left without train/ by a stopped run: make-sample takes only a new or empty one
  "$new_build/rn50" make-sample --out "$jpeg" --classes 100 --per-class 128 --val-per-class 1 --size 375 --noise 20 \
    > "$logs/make_sample.log" 2>&1 || { tail -3 "$logs/make_sample.log"; exit 1; }
fi
# The mean images/s of a run's measured epochs (all but the first).
rate() {
  python3 - "$1" <<'PY'
import json, sys
r = [json.loads(l) for l in open(sys.argv[1]) if '"type":"epoch"' in l][1:]
print(f"{sum(e['images_per_s'] for e in r) / len(r):.1f}" if r else "nan")
PY
}
run() {  # side (new|old), config, rep
  local side=$1 config=$2 rep=$3 bin extra name
  local tree=$PWD
  if [[ $side == new ]]; then bin=$new_build/rn50; extra=${NEW_ARGS:-}; else bin=$old_build/rn50; extra=${OLD_ARGS:-}; tree=$OLD; fi
  name=${config}_${side}_$rep
  rm -rf "/tmp/ab_runs/$name"
  # Each side its own configuration file: an older parser refuses keys it does not know.
  local common=(--config "$tree/configs/optimized.yaml" --device cuda:0 --warmup-epochs 0 --log-every 100000 --validate=off
                --checkpoint=off --out-dir "/tmp/ab_runs/$name")
  case $config in
    synthetic) "$bin" train "${common[@]}" --data synthetic --epochs "${EPOCHS_SYNTHETIC:-3}" $extra ;;
    cpu) "$bin" train "${common[@]}" --data-root "$jpeg" --decode cpu --epochs "${EPOCHS_JPEG:-4}" $extra ;;
    gpu) "$bin" train "${common[@]}" --data-root "$jpeg" --decode gpu --epochs "${EPOCHS_JPEG:-4}" $extra ;;
  esac > "$logs/$name.log" 2>&1 || { echo "$name failed (exit $?)" >&2; tail -3 "$logs/$name.log" >&2; }  # the rate alone on stdout
  cp "/tmp/ab_runs/$name/metrics.jsonl" "$logs/$name.jsonl" 2>/dev/null
  rate "/tmp/ab_runs/$name/metrics.jsonl" 2>/dev/null || echo nan
}
declare -A sum_new sum_old
for config in $CONFIGS; do sum_new[$config]=0; sum_old[$config]=0; done
for ((rep = 1; rep <= REPS; ++rep)); do
  for config in $CONFIGS; do
    # Alternate which side goes first, so that neither always meets a warmer machine.
    if (( rep % 2 )); then o=$(run old "$config" "$rep"); n=$(run new "$config" "$rep");
    else n=$(run new "$config" "$rep"); o=$(run old "$config" "$rep"); fi
    printf "%-10s rep %d  old %9s  new %9s img/s\n" "$config" "$rep" "$o" "$n" | tee -a "$OUT/ab_runs.txt"
    # A failed run reads "nan", which keeps the mean nan rather than stopping the script.
    sum_new[$config]=$(python3 -c "nan = float('nan'); print(${sum_new[$config]} + $n)")
    sum_old[$config]=$(python3 -c "nan = float('nan'); print(${sum_old[$config]} + $o)")
  done
done
{
  printf "%-10s %10s %10s %8s   (mean of %d reps; epochs after the first)\n" config old new "new/old" "$REPS"
  for config in $CONFIGS; do
    python3 -c "nan = float('nan'); o=${sum_old[$config]}/$REPS; n=${sum_new[$config]}/$REPS; print(f'{\"$config\":10s} {o:10.1f} {n:10.1f} {100*(n/o-1):+7.2f}%')"
  done
} | tee "$OUT/ab_table.txt"
