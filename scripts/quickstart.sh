#!/usr/bin/env bash
# From a fresh Debian machine: install, build, make the sample dataset and train on it (configs/smoke.yaml).
# Arguments go to rn50 train: run it again with --overwrite to train anew into runs/smoke (a fresh run into a folder
# holding a run's checkpoints is refused), or with --resume runs/smoke to continue.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/install-deps.sh"
"$root/scripts/build.sh" "$root/build"
cd "$root"
[[ -d sample/train ]] || ./build/rn50 make-sample --out sample --classes 10 --per-class 64 --val-per-class 16 --size 72
./build/rn50 train --config configs/smoke.yaml "$@"
