#!/usr/bin/env bash
# scripts/build-image.sh: builds rn50's image from the Dockerfile on one of its two bases (docs/container.md).
#   scripts/build-image.sh [gpu|cpu] [TAG] [DOCKER BUILD OPTIONS...]
#     gpu (default)  NVIDIA's PyTorch image; TAG defaults to rn50:gpu
#     cpu            Debian bookworm and Debian's LibTorch; TAG defaults to rn50:cpu
#   CPU_IMAGE=IMAGE  the bookworm image the cpu base starts from (default rn50-debian:bookworm, which
#                    scripts/container-test.sh makes with mmdebstrap; debian:bookworm where Docker Hub is reachable)
#   DOCKER=CLIENT    the docker client (default: one that builds with BuildKit: docker with buildx, or a 20.10 client)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
flavour=${1:-gpu}
[[ "$flavour" == gpu || "$flavour" == cpu ]] || { echo "build-image.sh: the base is gpu or cpu, not '$flavour'" >&2; exit 2; }
tag=${2:-rn50:$flavour}
shift $(($# < 2 ? $# : 2))

# BuildKit builds only the chosen base's stages; the legacy builder would pull both bases. A client of Docker 23 or
# later builds with BuildKit only through buildx; one before 23 (Debian's docker.io 20.10) has it inside.
if [[ -z "${DOCKER:-}" ]]; then
  for client in docker /usr/bin/docker; do
    command -v "$client" > /dev/null || continue
    if "$client" buildx version > /dev/null 2>&1; then DOCKER=$client; break; fi
    major=$("$client" version --format '{{.Client.Version}}' 2>/dev/null | cut -d. -f1)
    if [[ "$major" =~ ^[0-9]+$ ]] && ((major < 23)); then DOCKER=$client; break; fi
  done
  [[ -n "${DOCKER:-}" ]] || { echo "build-image.sh: no docker client that builds with BuildKit (install buildx)" >&2; exit 1; }
fi

args=(--build-arg "RN50_BASE=$flavour"
      --build-arg "RN50_REVISION=$(git -C "$root" rev-parse --short=12 HEAD 2>/dev/null || echo unknown)"
      --build-arg "RN50_CREATED=$(date -u +%Y-%m-%dT%H:%M:%SZ)")
[[ "$flavour" == cpu ]] && args+=(--build-arg "CPU_IMAGE=${CPU_IMAGE:-rn50-debian:bookworm}")
echo "build-image.sh: $flavour image $tag ($DOCKER)"
DOCKER_BUILDKIT=1 "$DOCKER" build "${args[@]}" -t "$tag" "$@" "$root"
