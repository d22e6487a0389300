#!/usr/bin/env bash
# bench/ports_curves.sh: does a model's fused path learn like its unfused one? Each model in MODELS trains the same
# generated JPEG folder (with validation) with `fusion: conv` and `fusion: off`, two seeds each, all runs at once on
# the one GPU (speed is not measured here); prints each epoch's training loss and validation top-1, and whether the
# fused runs' last-epoch loss lies within the unfused seeds' spread widened by the fused seeds' own. AdamW (lr 5e-4,
# weight decay 0.05) for ViT and ConvNeXt, configs/optimized.yaml's SGD for the others.
#   MODELS="vit_b_16 convnext_tiny"   EPOCHS=8   BATCH=64   SEEDS="1 2"   SKIP_SAMPLE=1 (reuse $data)
#   BUILD=DIR (default build-gpu)   DEVICE=cuda:0   EXTRA="--precision fp32 ..." (more keys for every run)
# Needs build-gpu/rn50 (bench/gpu_session.sh's build stage); logs and metrics under $OUT/curves, JSON lines in
# $OUT/curves.jsonl.
set -uo pipefail
OUT=${OUT:-/tmp/rn50-out}
MODELS=${MODELS:-vit_b_16 convnext_tiny}
EPOCHS=${EPOCHS:-8}
BATCH=${BATCH:-64}
SEEDS=${SEEDS:-1 2}
build=${BUILD:-$PWD/build-gpu}
data=/tmp/curves_sample
logs=$OUT/curves
mkdir -p "$logs"
export LD_LIBRARY_PATH=$build/opencv/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
if [[ -z "${SKIP_SAMPLE:-}" ]]; then  # 10 classes, 128 training and 32 validation images each, 256x341 (crops of 224)
  rm -rf "$data"
  "$build/rn50" make-sample --out "$data" --classes 10 --per-class 128 --val-per-class 32 --size 256 --noise 20 \
    > "$logs/make_sample.log" 2>&1 || { echo "make-sample failed"; tail -3 "$logs/make_sample.log"; exit 1; }
fi
runs=()
for model in $MODELS; do
  # The ports' own optimizers: AdamW for the transformer-like ones, otherwise optimized.yaml's SGD at its lr.
  optimizer=(--optimizer sgd)
  [[ $model == convnext* || $model == vit* ]] && optimizer=(--optimizer adamw --lr 0.0005 --weight-decay 0.05)
  for fusion in conv off; do
    for seed in $SEEDS; do
      name=${model}_${fusion}_s$seed
      rm -rf "/tmp/curves/$name"
      # Two decode threads a run: every run of the call shares the machine's cores.
      timeout 900 "$build/rn50" train --config configs/optimized.yaml --model "$model" --fusion "$fusion" \
        --data folder --data-root "$data" --device "${DEVICE:-cuda:0}" --batch-size "$BATCH" --epochs "$EPOCHS" --warmup-epochs 1 \
        "${optimizer[@]}" --seed "$seed" --workers 2 --log-every 100000 \
        --checkpoint=off --report=off ${EXTRA:-} --out-dir "/tmp/curves/$name" > "$logs/$name.log" 2>&1 &
      runs+=("$name")
    done
  done
done
wait
python3 - "$logs" "$OUT/curves.jsonl" "${runs[@]}" <<'PY'
import json, os, sys
logs, out, names = sys.argv[1], sys.argv[2], sys.argv[3:]
curves = {}
for n in names:
    path = f"/tmp/curves/{n}/metrics.jsonl"
    if not os.path.exists(path):
        print(f"{n}: no metrics (see {logs}/{n}.log)")
        continue
    epochs = [json.loads(l) for l in open(path) if '"type":"epoch"' in l]
    os.makedirs(logs, exist_ok=True)
    open(f"{logs}/{n}.jsonl", "w").writelines(json.dumps(e) + "\n" for e in epochs)
    curves[n] = [(e.get("train_loss"), e.get("top1")) for e in epochs]
with open(out, "a") as f:
    for n, c in curves.items():
        model, fusion, seed = n.rsplit("_", 2)
        f.write(json.dumps({"model": model, "fusion": fusion, "seed": seed[1:],
                            "train_loss": [l for l, _ in c], "val_top1": [t for _, t in c]}) + "\n")
models = sorted({n.rsplit("_", 2)[0] for n in curves})
for m in models:
    mine = {n: c for n, c in curves.items() if n.startswith(m + "_")}
    print(f"\n{m}: training loss / validation top-1 (%) by epoch")
    for n, c in sorted(mine.items()):
        print(f"  {n.split(m + '_')[1]:>8}: " + "  ".join(
            f"{l:.3f}/{100 * t:.1f}" if l is not None and t is not None else "-" for l, t in c))
    last = {n.split(m + "_")[1]: c[-1][0] for n, c in mine.items() if c and c[-1][0] is not None}
    off = [v for k, v in last.items() if k.startswith("off")]
    conv = [v for k, v in last.items() if k.startswith("conv")]
    if len(off) >= 2 and conv:
        spread = (max(off) - min(off)) + (max(conv) - min(conv) if len(conv) >= 2 else 0.0)
        lo, hi = min(off) - spread, max(off) + spread
        inside = all(lo <= v <= hi for v in conv)
        print(f"  last-epoch loss: fusion conv {', '.join(f'{v:.4f}' for v in conv)}; off {', '.join(f'{v:.4f}' for v in off)}; "
              f"allowed {lo:.4f}-{hi:.4f} (the seeds' spreads): {'within' if inside else 'OUTSIDE'}")
PY
