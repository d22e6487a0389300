#!/usr/bin/env bash
# scripts/container-test.sh: the CPU image, built and run end to end: makes the Debian bookworm base with mmdebstrap
# and docker import (cached), builds the image with scripts/build-image.sh cpu, and inside it makes the sample, trains
# it, runs rn50 doctor --json, checks the doctor's limit rows and the workers count under --cpus, --memory and
# --shm-size, and writes the ablation tool's report. Exits non-zero at the first failure. Run it before changing
# the Dockerfile or scripts/ (docs/container.md says why it is not in CI).
#   RN50_CONTAINER_OUT=DIR  logs, the doctor's JSON, the report and timings.txt (default /tmp/rn50-container-test)
#   RN50_BASE_TAR=FILE      the cached base file system (default ~/.cache/rn50/debian-bookworm.tar)
#   RN50_REFRESH_BASE=1     make the base again (security updates) instead of reusing the cached one
#   RN50_EPOCHS=N           epochs of the sample's training (default 2)
#   RN50_IMAGE=TAG          the image's tag (default rn50:cpu; its build stage TAG-build): several checkouts that
#                           share one dockerd each use their own
# As root (or with sudo) it installs docker.io and mmdebstrap from Debian and starts dockerd where none runs; a
# dockerd it started is stopped at the end.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${RN50_CONTAINER_OUT:-/tmp/rn50-container-test}
base_tar=${RN50_BASE_TAR:-${XDG_CACHE_HOME:-$HOME/.cache}/rn50/debian-bookworm.tar}
base_image=rn50-debian:bookworm
image=${RN50_IMAGE:-rn50:cpu}
stop_container=$(echo "$image" | tr ':/' '--')-stop  # named after the image: unique per checkout too
epochs=${RN50_EPOCHS:-2}
sudo_cmd=""; [[ $(id -u) != 0 ]] && sudo_cmd="sudo"

rm -rf "$out"
mkdir -p "$out/work"
: > "$out/timings.txt"
started_at=$SECONDS
step_started=$SECONDS
step() {  # ends the previous step's timing and starts the next
  echo "container-test: $*"
  step_started=$SECONDS
}
took() { echo "$1 $((SECONDS - step_started)) s" | tee -a "$out/timings.txt"; }
fail() { echo "container-test: FAILED: $*" >&2; exit 1; }

step "tools: docker.io and mmdebstrap"
missing=()
command -v mmdebstrap > /dev/null || missing+=(mmdebstrap)
[[ -x /usr/sbin/dockerd ]] || command -v dockerd > /dev/null || missing+=(docker.io)
if ((${#missing[@]})); then
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends "${missing[@]}" \
    > "$out/apt.log" 2>&1 || fail "installing ${missing[*]} (log: $out/apt.log)"
fi
dockerd_pid=""
if ! docker info > /dev/null 2>&1 && ! /usr/bin/docker info > /dev/null 2>&1; then
  $sudo_cmd dockerd > "$out/dockerd.log" 2>&1 &
  dockerd_pid=$!
  for _ in $(seq 60); do /usr/bin/docker info > /dev/null 2>&1 && break; sleep 1; done
  /usr/bin/docker info > /dev/null 2>&1 || fail "dockerd did not start (log: $out/dockerd.log)"
fi
stop_dockerd() { if [[ -n "$dockerd_pid" ]]; then $sudo_cmd kill "$dockerd_pid" 2>/dev/null || true; wait "$dockerd_pid" 2>/dev/null || true; fi; }
trap stop_dockerd EXIT
# The client scripts/build-image.sh picks builds with BuildKit; the same one runs the containers.
docker_cmd=$(command -v docker)
if ! "$docker_cmd" buildx version > /dev/null 2>&1 && [[ -x /usr/bin/docker ]]; then docker_cmd=/usr/bin/docker; fi
export DOCKER=$docker_cmd
took tools

step "base: $base_image"
if [[ "${RN50_REFRESH_BASE:-0}" == 1 ]]; then rm -f "$base_tar"; "$DOCKER" rmi -f "$base_image" > /dev/null 2>&1 || true; fi
if ! "$DOCKER" image inspect "$base_image" > /dev/null 2>&1; then
  if [[ ! -s "$base_tar" ]]; then
    mkdir -p "$(dirname "$base_tar")"
    partial=${base_tar%.tar}.partial.tar  # mmdebstrap writes a tar file only for a name ending in .tar
    # minbase: dpkg, apt and what they need; docs, man pages and locales are left out of every later install too;
    # merged /usr by the hook, without the usrmerge package and the Perl it pulls in. The hook's $1 is mmdebstrap's.
    # shellcheck disable=SC2016
    $sudo_cmd mmdebstrap --variant=minbase --mode=root --hook-dir=/usr/share/mmdebstrap/hooks/merged-usr \
      --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/doc/*' \
      --dpkgopt='path-include=/usr/share/doc/*/copyright' --dpkgopt='path-exclude=/usr/share/locale/*' \
      --dpkgopt='path-exclude=/usr/share/info/*' \
      --customize-hook='rm -rf "$1"/var/lib/apt/lists/* "$1"/var/cache/apt/*.bin' \
      bookworm "$partial" "deb http://deb.debian.org/debian bookworm main" \
      "deb http://deb.debian.org/debian bookworm-updates main" \
      "deb http://deb.debian.org/debian-security bookworm-security main" > "$out/mmdebstrap.log" 2>&1 ||
      fail "mmdebstrap (log: $out/mmdebstrap.log)"
    mv "$partial" "$base_tar"
  fi
  "$DOCKER" import "$base_tar" "$base_image" > /dev/null
fi
took base

step "build: $image"
"$root/scripts/build-image.sh" cpu "$image" --progress=plain > "$out/build.log" 2>&1 || {
  tail -30 "$out/build.log"
  fail "the image build (log: $out/build.log)"
}
# The build stage too, from the same cache: what the slim runtime stage saves.
"$root/scripts/build-image.sh" cpu "$image-build" --target build > "$out/build-stage.log" 2>&1 || fail "the build stage"
size() { "$DOCKER" image inspect -f '{{.Size}}' "$1"; }
echo "image $image $(size "$image") bytes; build stage $(size "$image-build") bytes; base $(size "$base_image") bytes" |
  tee "$out/sizes.txt"
took build

# The runtime stage's handling of what only the gpu base has, on files of this one: a library of no package, found as
# an EXTRA pattern beside a second name of it (pip torch's and CUDA's libraries), copied once, its other name a link.
step "runtime-libs: a library of no package, and a second name of it"
"$DOCKER" run --rm -v "$root/scripts/runtime-libs.sh:/runtime-libs.sh:ro" --entrypoint bash "$image-build" -c '
  set -e
  mkdir -p /opt/fake && cp -L /usr/lib/x86_64-linux-gnu/libz.so.1 /opt/fake/libfake.so.1 && ln -s libfake.so.1 /opt/fake/libfake.so
  bash /runtime-libs.sh collect /src/build/rn50 /tmp/collected /opt/fake/*.so* /opt/none/*.so > /dev/null  # as the Dockerfile expands them
  grep -qx "libfake.so.1 - -" /tmp/collected/libs.txt && grep -qx "libfake.so - -" /tmp/collected/libs.txt
  [[ -L /tmp/collected/lib/libfake.so && -f /tmp/collected/lib/libfake.so.1 && ! -L /tmp/collected/lib/libfake.so.1 ]]
  bash /runtime-libs.sh install /tmp/collected /tmp/runtime > /dev/null
  [[ -L /tmp/runtime/lib/libfake.so && -f /tmp/runtime/lib/libfake.so.1 ]]
  ! [[ -e /tmp/runtime/lib/libstdc++.so.6 ]]  # a library of a package this base has is not copied
' > "$out/runtime-libs.log" 2>&1 || fail "runtime-libs.sh on a library of no package (log: $out/runtime-libs.log)"
took runtime-libs

# As the docs say to write into a bind mount: the image's own user is not root, so runs take the host user's ids.
run() { "$DOCKER" run --rm --user "$(id -u):$(id -g)" -v "$out/work:/work" "$@"; }
step "user: not root by default; rn50 --version inside"
[[ "$("$DOCKER" run --rm --entrypoint id "$image" -u)" == 10001 ]] || fail "the image's default user is not uid 10001"
"$DOCKER" run --rm "$image" --version > "$out/version.txt" 2>&1 || fail "rn50 --version (log: $out/version.txt)"
grep -q '^version' "$out/version.txt" && ! grep -q 'revision *unknown' "$out/version.txt" ||
  fail "rn50 --version names no version or revision (log: $out/version.txt)"
"$DOCKER" inspect --format '{{index .Config.Labels "org.opencontainers.image.revision"}}' "$image" | grep -qv unknown ||
  fail "no revision label"
took user
step "sample: rn50 make-sample"
run "$image" make-sample --out /work/sample --classes 10 --per-class 64 --val-per-class 16 --size 72 \
  > "$out/make-sample.log" 2>&1 || fail "make-sample (log: $out/make-sample.log)"
[[ -d "$out/work/sample/train" && -d "$out/work/sample/val" ]] || fail "make-sample wrote no train/ and val/"
took sample

step "train: configs/smoke.yaml, $epochs epochs"
run --cpus 2 --memory 6g --shm-size 256m "$image" train --config configs/smoke.yaml --data-root /work/sample \
  --out-dir /work/runs/smoke --epochs "$epochs" --device cpu > "$out/train.log" 2>&1 ||
  fail "training (log: $out/train.log)"
python3 - "$out/work/runs/smoke" "$epochs" <<'EOF' | tee "$out/train-summary.txt" || fail "the training's records"
import json, math, os, sys
run, epochs = sys.argv[1], int(sys.argv[2])
records = [json.loads(l) for l in open(os.path.join(run, "metrics.jsonl"))]
done = [r for r in records if r.get("type") == "epoch"]
assert len(done) == epochs, f"{len(done)} epoch records, {epochs} expected"
for r in done:
    assert math.isfinite(r["train_loss"]), f"epoch {r['epoch']}: train_loss {r['train_loss']}"
    assert r["bad_samples"] == 0, f"epoch {r['epoch']}: {r['bad_samples']} bad samples"
assert os.path.getsize(os.path.join(run, "checkpoint.safetensors")) > 0, "no checkpoint"
last = done[-1]
print(f"train: {epochs} epochs, last: train_loss {last['train_loss']:.3f}, top1 {last['top1']}, "
      f"{last['images_per_s']:.1f} img/s, peak host RSS {last['peak_host_rss_gib']:.2f} GiB")
EOF
took train

step "stop: docker stop ends a training run gracefully (rn50 as PID 1)"
"$DOCKER" rm -f "$stop_container" > /dev/null 2>&1 || true  # 20.10 fails on no such container
"$DOCKER" run -d --name "$stop_container" --user "$(id -u):$(id -g)" -v "$out/work:/work" "$image" train --config configs/smoke.yaml \
  --data-root /work/sample --out-dir /work/runs/stop --epochs 100 --log-every 1 --device cpu > /dev/null ||
  fail "starting the run to stop"
for _ in $(seq 600); do grep -q '"type":"step"' "$out/work/runs/stop/metrics.jsonl" 2>/dev/null && break; sleep 0.5; done
"$DOCKER" stop -t 30 "$stop_container" > /dev/null
code=$("$DOCKER" wait "$stop_container")
"$DOCKER" logs "$stop_container" > "$out/stop.log" 2>&1
"$DOCKER" rm "$stop_container" > /dev/null
[[ "$code" == 143 ]] || fail "docker stop: exit $code, not 143 (log: $out/stop.log)"
grep -q "stopped by SIGTERM" "$out/stop.log" || fail "no stop line (log: $out/stop.log)"
grep -q '"type":"stop"' "$out/work/runs/stop/metrics.jsonl" || fail "no stop record"
[[ -s "$out/work/runs/stop/checkpoint.safetensors" ]] || fail "no checkpoint after the stop"
! ls "$out/work/runs/stop/"*.tmp > /dev/null 2>&1 || fail "a temporary left after the stop"
took stop

step "doctor: rn50 doctor --json"
run "$image" doctor --json > "$out/doctor.json" 2> "$out/doctor.err" || fail "doctor (stderr: $out/doctor.err)"
python3 - "$out/doctor.json" <<'EOF' || fail "the doctor's JSON"
import json, sys
rows = json.load(open(sys.argv[1]))
sections = {r["section"] for r in rows}
for s in ["cpu", "limits", "compute", "verdict"]:
    assert s in sections, f"no {s} rows"
assert all(r["verdict"] in ("ok", "warn", "bad", "info") for r in rows), "a verdict outside ok|warn|bad|info"
print("doctor:", "; ".join(f"{r['check']}: {r['value']} ({r['verdict']})" for r in rows if r["section"] in ("cpu", "limits", "verdict")))
EOF
took doctor

step "limits: the doctor's rows and workers under --cpus, --memory, --shm-size and --ulimit memlock"
# "usable cores" without limits: "U of H", U the affinity mask's count, H the machine's.
read -r usable _ hardware < <(run "$image" doctor --limits --json |
  python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["value"])')
limited() {  # ARGS...: doctor --limits --json under these docker run options
  run "$@" "$image" doctor --limits --json
}
# memlock: lowered to Docker's old default of 64 KiB (raising it, --ulimit memlock=-1, needs CAP_SYS_RESOURCE, which
# some hosts do not give dockerd).
limited --cpus 1 --memory 1g --shm-size 64m --ulimit memlock=65536:65536 > "$out/limits-tight.json" ||
  fail "doctor --limits under --cpus 1"
limited --memory 4g --shm-size 1g > "$out/limits-wide.json" || fail "doctor --limits under --memory 4g"
python3 - "$out/limits-tight.json" "$out/limits-wide.json" "$usable" "$hardware" <<'EOF' || fail "the limit rows"
import json, sys
tight, wide = ({r["check"]: r for r in json.load(open(p))} for p in sys.argv[1:3])
usable, hardware = int(sys.argv[3]), int(sys.argv[4])
def expect(rows, check, value_start, verdict):
    r = rows[check]
    assert r["value"].startswith(value_start) and r["verdict"] == verdict, f"{check}: {r} (expected {value_start!r}, {verdict})"
expect(tight, "usable cores", f"1 of {hardware}", "warn" if hardware > 1 else "ok")
expect(tight, "CPU quota (cgroup)", "1 CPU (cgroup v", "warn" if usable > 1 else "ok")
expect(tight, "memory limit (cgroup)", "1.0 GiB (cgroup v", "bad")
expect(tight, "memlock limit (ulimit -l)", "64 KiB", "info")  # no GPU: nothing locks memory
expect(tight, "/dev/shm size", "64 MiB", "info")
expect(wide, "usable cores", f"{usable} of {hardware}", "ok" if usable == hardware else "warn")
expect(wide, "CPU quota (cgroup)", "none", "ok")
expect(wide, "memory limit (cgroup)", "4.0 GiB (cgroup v", "ok")
expect(wide, "/dev/shm size", "1.0 GiB", "info")
print(f"limits: --cpus 1 --memory 1g --shm-size 64m --ulimit memlock=64k and --memory 4g --shm-size 1g read as "
      f"expected ({usable} of {hardware} cores without a quota)")
EOF
# workers: -1 as the run resolved it (config.yaml): the quota's one core, and every core without a quota.
for cpus in 1 none; do
  opts=(); [[ "$cpus" != none ]] && opts=(--cpus "$cpus")
  run "${opts[@]}" "$image" train --config configs/smoke.yaml --data-root /work/sample --out-dir "/work/runs/workers-$cpus" \
    --epochs 1 --max-steps 1 --validate=off --checkpoint=off --device cpu > "$out/workers-$cpus.log" 2>&1 ||
    fail "training under --cpus $cpus (log: $out/workers-$cpus.log)"
  workers=$(awk '$1 == "workers:" {print $2}' "$out/work/runs/workers-$cpus/config.yaml")
  expected=$([[ "$cpus" == none ]] && echo "$usable" || echo 1)
  [[ "$workers" == "$expected" ]] || fail "workers: -1 resolved to $workers under --cpus $cpus, not $expected"
  echo "workers: -1 under --cpus $cpus: $workers"
done | tee "$out/workers.txt"
took limits

step "report: bench/ablation.py --quick"
run --entrypoint python3 "$image" bench/ablation.py --quick --rn50 rn50 \
  --out /work/report --work /tmp/ablation > "$out/report.log" 2>&1 || fail "ablation.py --quick (log: $out/report.log)"
[[ -s "$out/work/report/report.md" && -s "$out/work/report/images_per_s.svg" ]] || fail "no report.md or pictures"
tail -1 "$out/report.log"
took report

echo "total $((SECONDS - started_at)) s" | tee -a "$out/timings.txt"
echo "container-test: passed; logs, sizes and timings in $out"
