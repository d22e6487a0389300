#!/usr/bin/env bash
# bench/results/2026-12-01-reports/make.sh: writes this folder's comparison and run reports again from the recorded
# files they come from. From the repository root: bench/results/2026-12-01-reports/make.sh [OUT] (RN50: the binary).
set -euo pipefail
rn50=${RN50:-build/rn50}
here=bench/results/2026-12-01-reports
out=${1:-$here}
in=$here/inputs
ablation=bench/results/2026-11-30-h200-ablation-rerun/ablation.json
mkdir -p "$out/compare" "$out/reports"
# The ablation.json predates machine.gpu; its NOTES.md and logs (commit e7a59af) say one H200.
"$rn50" compare "$in/cpu-2core-b64-baseline" "$ablation" "$in/h200-x1-fp16-cl-graph" "$in/h200-x2-fp16-cl-graph" \
  "$in/h200-x2-fp16-cl-eager" --name "$ablation=H200 x1" --prices "$here/prices.yaml" --out "$out/compare" >/dev/null
for run in h200-smoke h200-x2-fp16-cl-eager h200-jpeg-gpu-decode-appended cpu-2core-b64-baseline; do
  "$rn50" report "$in/$run" --out "$out/reports/$run.html" >/dev/null
done
