#!/usr/bin/env bash
# bench/results/rebuild.sh: writes the pages and pictures of bench/results again from the committed JSON and run
# files they come from; none of them is committed (.gitignore).
#
#   bench/results/rebuild.sh RN50_BINARY [OUT_DIR]      (OUT_DIR: default bench/results itself)
#
# What it writes, under OUT_DIR, each folder as in bench/results:
#   FOLDER/report.md, images_per_s.svg, step_split.svg  for every FOLDER/ablation.json (bench/ablation.py --render)
#   2026-12-01-reports/compare/                          rn50 compare of the recorded runs: compare.md, compare.json,
#                                                        throughput.svg, utilisation.svg, cost.svg
#   2026-12-01-reports/reports/RUN.html                  rn50 report of every recorded run folder under inputs/
#   2026-12-01-reports/reports/h200-x2-fp16-cl-eager.png a screenshot of that page, only where chromium is installed
# It runs from the repository root, so that every output names its inputs by their paths in the tree, whatever
# OUT_DIR is.
set -euo pipefail
if [[ $# -lt 1 || $# -gt 2 || "$1" == -h || "$1" == --help ]]; then
  echo "usage: bench/results/rebuild.sh RN50_BINARY [OUT_DIR]" >&2
  exit 2
fi
rn50=$(realpath "$1")
[[ -x "$rn50" ]] || { echo "rebuild.sh: $1 is not an executable" >&2; exit 2; }
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
out=$(realpath -m "${2:-$root/bench/results}")
cd "$root"
results=bench/results
python=${PYTHON:-python3}
wrote() { for f in "$@"; do echo "rebuild.sh: wrote $f"; done; }

# The ablations: report.md and both pictures from each ablation.json.
for json in "$results"/*/ablation.json; do
  folder=$(basename "$(dirname "$json")")
  mkdir -p "$out/$folder"
  [[ "$(realpath "$json")" == "$(realpath -m "$out/$folder/ablation.json")" ]] || cp "$json" "$out/$folder/"
  "$python" bench/ablation.py --out "$out/$folder" --render >/dev/null
  wrote "$folder/report.md" "$folder/images_per_s.svg" "$folder/step_split.svg"
done

# The comparison and the run pages, from the recorded runs (2026-12-01-reports/README.md says where each was made).
reports=$results/2026-12-01-reports
inputs=$reports/inputs
ablation=$results/2026-11-30-ablation/ablation.json
mkdir -p "$out/2026-12-01-reports/compare" "$out/2026-12-01-reports/reports"
# That ablation.json predates its machine.gpu field: its NOTES.md and logs say one H200.
"$rn50" compare "$inputs/cpu-2core-b64-baseline" "$ablation" "$inputs/h200-x1-fp16-cl-graph" \
  "$inputs/h200-x2-fp16-cl-graph" "$inputs/h200-x2-fp16-cl-eager" --name "$ablation=H200 x1" \
  --prices "$reports/prices.yaml" --out "$out/2026-12-01-reports/compare" >/dev/null
wrote 2026-12-01-reports/compare/{compare.md,compare.json,throughput.svg,utilisation.svg,cost.svg}
for run in "$inputs"/*/; do
  run=${run%/}
  "$rn50" report "$run" --out "$out/2026-12-01-reports/reports/$(basename "$run").html" >/dev/null
  wrote "2026-12-01-reports/reports/$(basename "$run").html"
done

# The screenshot needs a browser; without one the page itself is the result.
browser=$(command -v chromium || command -v chromium-browser || true)
page=$out/2026-12-01-reports/reports/h200-x2-fp16-cl-eager
if [[ -n "$browser" ]]; then
  "$browser" --headless --no-sandbox --screenshot="$page.png" --window-size=1200,3300 "file://$page.html" \
    >/dev/null 2>&1
  wrote 2026-12-01-reports/reports/h200-x2-fp16-cl-eager.png
else
  echo "rebuild.sh: no chromium here: no screenshot of h200-x2-fp16-cl-eager.html"
fi
