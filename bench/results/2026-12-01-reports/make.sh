#!/usr/bin/env bash
# bench/results/2026-12-01-reports/make.sh: writes this folder's comparison and run page again from the recorded
# files they come from. Those files are not kept in the tree: they are restored from the commit that added them
# into a temporary folder, removed at the end. From the repository root:
#   bench/results/2026-12-01-reports/make.sh [OUT]    (default OUT: this folder; RN50: the binary, build/rn50)
#   INPUTS=DIR ...make.sh [OUT]                        restore the inputs into DIR and keep them there
set -euo pipefail
here=bench/results/2026-12-01-reports
# The commit that added inputs/ (its H200 files are byte for byte those of e7a59af, README.md says where from).
inputs_commit=23002e39e4a727cb84b7afe1e54ba896a587c0fd
ablation=bench/results/2026-11-30-h200-ablation-rerun/ablation.json
rn50=$(realpath "${RN50:-build/rn50}")
out=$(realpath -m "${1:-$here}")
root=$(pwd)
if ! git -C "$root" cat-file -e "$inputs_commit^{commit}" 2>/dev/null; then
  echo "make.sh: commit $inputs_commit is not in this clone (a shallow one? git fetch --unshallow)" >&2
  exit 1
fi
if [[ -n "${INPUTS:-}" ]]; then
  work=$(realpath -m "$INPUTS")
  mkdir -p "$work"
else
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
fi
git -C "$root" archive "$inputs_commit" -- "$here/inputs" | tar -x -C "$work"
mkdir -p "$work/${ablation%/*}" "$out/compare" "$out/reports"
cp "$root/$ablation" "$work/$ablation"
# The outputs name each input by its path; run from $work, it is the path the input had in the tree.
cd "$work"
in=$here/inputs
# The ablation.json predates machine.gpu; its NOTES.md and logs (commit e7a59af) say one H200.
"$rn50" compare "$in/cpu-2core-b64-baseline" "$ablation" "$in/h200-x1-fp16-cl-graph" "$in/h200-x2-fp16-cl-graph" \
  "$in/h200-x2-fp16-cl-eager" --name "$ablation=H200 x1" --prices "$root/$here/prices.yaml" --out "$out/compare" \
  >/dev/null
"$rn50" report "$in/h200-x2-fp16-cl-eager" --out "$out/reports/h200-x2-fp16-cl-eager.html" >/dev/null
