#!/usr/bin/env bash
# bench/ports_speed.sh: each model's training speed on one GPU, rn50 against PyTorch on the same GPU in the same call:
# rn50 with configs/optimized.yaml's switches (fp16, channels-last, cuDNN autotuning, CUDA graph, fusion) on synthetic
# data, and bench/torch_reference.py's torchvision model (eager and/or torch.compile, the same precision, layout and
# optimizer: AdamW for ConvNeXt and ViT, SGD otherwise). Prints a table; every run's log, metrics and JSON under $OUT.
#   MODELS="resnext50_32x4d convnext_tiny vit_b_16 efficientnet_b0"   STAGES="build rn50 torch"
#   TORCH_MODES="eager compile"   BATCH=256   STEPS=40 (a measured rn50 epoch; 3 epochs, the first not measured)
#   UNFUSED="efficientnet_b0"     models also trained with fusion: off, for the fused paths' gain
#   SKIP_BUILD=1: reuse build-gpu
set -uo pipefail
OUT=${OUT:-/tmp/rn50-out}
MODELS=${MODELS:-resnext50_32x4d convnext_tiny vit_b_16 efficientnet_b0}
STAGES=${STAGES:-build rn50 torch}
TORCH_MODES=${TORCH_MODES:-eager compile}
BATCH=${BATCH:-256}
STEPS=${STEPS:-40}
UNFUSED=${UNFUSED:-}
export RN50_TORCH=pip RN50_OPENCV_DEBS=$(realpath "${RN50_OPENCV_DEBS:-.debs}")
build=$PWD/build-gpu
logs=$OUT/ports
mkdir -p "$logs"
has() { [[ " $STAGES " == *" $1 "* ]]; }
if has build && [[ -z "${SKIP_BUILD:-}" ]]; then
  RN50_BUILD_TARGETS=${BUILD_TARGETS:-rn50} scripts/build.sh "$build" > "$logs/build.log" 2>&1 ||
    { grep -E "error" "$logs/build.log" | head -20; exit 1; }
fi
export LD_LIBRARY_PATH=$build/opencv/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
adamw() { [[ $1 == convnext* || $1 == vit* ]]; }
# The mean images/s of a run's epochs after the first, and its peak reserved memory.
summary() {
  python3 - "$1" <<'PY'
import json, sys
r = [json.loads(l) for l in open(sys.argv[1]) if '"type":"epoch"' in l][1:]
rate = sum(e["images_per_s"] for e in r) / len(r) if r else float("nan")
mem = max((e.get("peak_gpu_reserved_gib") or 0) for e in r) if r else float("nan")
print(f"{rate:.1f} {mem:.2f}")
PY
}
rn50_run() {  # model, fusion, name
  local model=$1 fusion=$2 name=$3 extra=()
  if adamw "$model"; then extra=(--optimizer adamw --lr 0.001 --weight-decay 0.05); fi
  rm -rf "/tmp/ports/$name"
  timeout 300 "$build/rn50" train --config configs/optimized.yaml --model "$model" --fusion "$fusion" --data synthetic \
    --device cuda:0 --batch-size "$BATCH" --synthetic-images $((BATCH * STEPS)) --epochs 3 --warmup-epochs 0 \
    --log-every 100000 --validate=off --checkpoint=off --report=off --out-dir "/tmp/ports/$name" "${extra[@]}" \
    > "$logs/$name.log" 2>&1 || echo "$name: exit $?"
  cp "/tmp/ports/$name/metrics.jsonl" "$logs/$name.jsonl" 2>/dev/null
  read -r rate mem < <(summary "/tmp/ports/$name/metrics.jsonl" 2>/dev/null || echo "nan nan")
  echo "{\"model\": \"$model\", \"side\": \"rn50 fusion $fusion\", \"images_per_s\": $rate, \"peak_reserved_gib\": $mem}" \
    >> "$OUT/ports.jsonl"
  grep -h "(fusion)\|(optimizer)\|cuda_graph:" "$logs/$name.log" | cut -c40-300 >> "$OUT/fusion_rows.txt"
}
for model in $MODELS; do
  if has rn50; then
    fusion=conv
    rn50_run "$model" "$fusion" "${model}_rn50"
    [[ " $UNFUSED " == *" $model "* ]] && rn50_run "$model" off "${model}_rn50_off"
  fi
  if has torch; then
    timeout 400 python3 bench/torch_reference.py --model "$model" --modes $TORCH_MODES --batch "$BATCH" --steps 50 \
      > "$logs/${model}_torch.jsonl" 2> "$logs/${model}_torch.err" || echo "$model torch: exit $?"
    python3 - "$logs/${model}_torch.jsonl" >> "$OUT/ports.jsonl" <<'PY'
import json, sys
for l in open(sys.argv[1]):
    r = json.loads(l)
    print(json.dumps({"model": r["model"], "side": "torch " + r["mode"], "images_per_s": round(r["images_per_s"], 1),
                      "peak_reserved_gib": r["peak_reserved_gib"], "setup_s": r["setup_s"]}))
PY
  fi
done
python3 - "$OUT/ports.jsonl" <<'PY' | tee "$OUT/ports_table.txt"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
print(f"{'model':18s} {'side':18s} {'img/s':>9s} {'reserved GiB':>13s}")
for r in rows:
    print(f"{r['model']:18s} {r['side']:18s} {r['images_per_s']:9.1f} {r['peak_reserved_gib']:13.2f}")
PY
