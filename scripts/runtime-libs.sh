#!/usr/bin/env bash
# scripts/runtime-libs.sh: the shared libraries rn50 loads, carried from the Dockerfile's build stage to its slim
# runtime stage as files: the libraries themselves, not their packages, whose dependencies would bring what rn50
# never loads (Debian's LibTorch links OpenCV's GUI and video modules: Qt, Mesa with LLVM, FFmpeg).
#   collect BINARY DIR [EXTRA...]  build stage: BINARY to DIR/bin, every library it and the EXTRA files (libraries
#                                  opened at run time, which ldd cannot see) load to DIR/lib, DIR/libs.txt ("NAME
#                                  PACKAGE VERSION" a line, "- -" for a library of no package: pip torch's, CUDA's)
#                                  and each package's copyright file to DIR/licenses
#   install FROM DIR [PACKAGE...]  runtime stage, FROM being collect's DIR (bind-mounted, so that no library enters a
#                                  layer unless it stays): installs the PACKAGEs, then copies to DIR rn50 and every
#                                  library whose package this base lacks; registers DIR/lib with the loader; fails
#                                  if rn50 misses a library
# Never carried: glibc's libraries (every base has them), the GPU driver's (libcuda, libnvidia-*: the NVIDIA
# container toolkit mounts the host's, which must match its kernel module) and pip torch's Python bindings.
set -euo pipefail

skip='^(linux-vdso\.so|ld-linux-x86-64\.so|libc\.so|libm\.so|libdl\.so|libpthread\.so|librt\.so|libresolv\.so|libutil\.so|libcuda\.so|libnvidia-|libnvcuvid\.so|libtorch_python\.so)'

owner() {  # the package holding a file, and its version ("- -" for none); dpkg may know it under /usr or not
  local path=$1 p
  for p in "$(realpath "$path")" "$path" "/usr$path" "${path#/usr}"; do
    local pkg
    pkg=$(dpkg-query -S "$p" 2>/dev/null | grep -v '^diversion' | head -1 | cut -d: -f1) || true
    pkg=${pkg%%,*}
    if [[ -n "$pkg" ]]; then
      echo "$pkg $(dpkg-query -W -f='${Version}' "$pkg" 2>/dev/null | head -1)"
      return
    fi
  done
  echo "- -"
}

# The libraries `file` needs that the loader cannot find, the GPU driver's left out: a docker build has no driver.
missing() { ldd "$1" | awk '$2 == "=>" && $3 == "not" {print $1}' | grep -Ev "$skip" || true; }
driver_missing() { ldd "$1" | awk '$2 == "=>" && $3 == "not" {print $1}' | grep -E "$skip" || true; }

installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }

collect() {
  local binary=$1 dir=$2
  shift 2
  mkdir -p "$dir/bin" "$dir/lib"
  install -m 755 "$binary" "$dir/bin/rn50"
  local files=("$binary") f
  # An EXTRA pattern that matched nothing is skipped, and so is a file never carried.
  for f in "$@"; do [[ -e "$f" && ! "$(basename "$f")" =~ $skip ]] && files+=("$f"); done
  : > "$dir/libs.txt"
  declare -A seen=()
  local name path pkg
  for f in "${files[@]}"; do
    if [[ "$f" != "$binary" ]]; then seen[$(basename "$f")]=$f; fi
    if [[ -n "$(missing "$f")" ]]; then
      echo "runtime-libs: $f misses $(missing "$f" | tr '\n' ' ')" >&2
      exit 1
    fi
    while read -r name path; do
      [[ -n "$path" ]] && seen[$name]=$path
    done < <(ldd "$f" | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}')
  done
  # real file -> the name it was copied under: other names of it become links, not copies. Longest names first, so
  # that the file goes under its most specific name (libnvrtc.so.12.8.61, not libnvrtc.so).
  declare -A copied=()
  for name in $(printf '%s\n' "${!seen[@]}" | awk '{print length($0), $0}' | sort -k1,1nr -k2 | cut -d' ' -f2); do
    [[ "$name" =~ $skip ]] && continue
    local real
    real=$(realpath "${seen[$name]}")
    if [[ -n "${copied[$real]:-}" ]]; then
      ln -sf "${copied[$real]}" "$dir/lib/$name"
    else
      cp -L "$real" "$dir/lib/$name"
      copied[$real]=$name
    fi
    local owned
    owned=$(owner "${seen[$name]}")
    echo "$name $owned" >> "$dir/libs.txt"
    pkg=${owned%% *}
    if [[ "$pkg" != - && -f "/usr/share/doc/$pkg/copyright" ]]; then
      mkdir -p "$dir/licenses"
      cp "/usr/share/doc/$pkg/copyright" "$dir/licenses/$pkg"
    fi
  done
  sort -o "$dir/libs.txt" "$dir/libs.txt"
  echo "runtime-libs: $(wc -l < "$dir/libs.txt") libraries, $(awk '$2 == "-"' "$dir/libs.txt" | wc -l) of no package"
}

install_runtime() {
  local from=$1 dir=$2
  shift 2
  export DEBIAN_FRONTEND=noninteractive
  if (($#)); then
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "$@"
    rm -rf /var/lib/apt/lists/* /var/cache/apt/archives/*.deb
  fi
  mkdir -p "$dir/bin" "$dir/lib" "$dir/licenses"
  install -m 755 "$from/bin/rn50" "$dir/bin/rn50"
  cp "$from/libs.txt" "$dir/libs.txt"
  local name pkg copies=0 kept=0
  while read -r name pkg _; do
    # A package this base has serves as it is (libstdc++6, zlib1g: a library keeps its ABI within a soname).
    if [[ "$pkg" != - ]] && installed "$pkg"; then
      kept=$((kept + 1))
      continue
    fi
    cp -a "$from/lib/$name" "$dir/lib/$name"  # a link stays a link: its target is a line of its own
    copies=$((copies + 1))
    if [[ "$pkg" != - && -f "$from/licenses/$pkg" ]]; then cp "$from/licenses/$pkg" "$dir/licenses/$pkg"; fi
  done < "$from/libs.txt"
  # Named to sort after the system's own folders: a copy never shadows a library the system has.
  echo "$dir/lib" > /etc/ld.so.conf.d/zz-rn50.conf
  ldconfig
  ln -sf "$dir/bin/rn50" /usr/local/bin/rn50
  echo "runtime-libs: $copies libraries copied ($(du -sh "$dir/lib" | cut -f1)), $kept from this base's packages"
  if [[ -n "$(missing "$dir/bin/rn50")" ]]; then
    echo "runtime-libs: rn50 misses $(missing "$dir/bin/rn50" | tr '\n' ' ')in the runtime stage" >&2
    exit 1
  fi
  # A library of this base older than the build's (a symbol version it lacks), found without starting rn50.
  local versions
  versions=$(ldd -r "$dir/bin/rn50" 2>&1 | grep "version .* not found" || true)
  if [[ -n "$versions" ]]; then
    echo "runtime-libs: $versions" >&2
    exit 1
  fi
  if [[ -z "$(driver_missing "$dir/bin/rn50")" ]]; then
    rn50 --help > /dev/null  # loads every library and checks their symbol versions
  else
    echo "runtime-libs: not started here: the GPU driver's $(driver_missing "$dir/bin/rn50" | tr '\n' ' ')come with the container"
  fi
}

case "${1:-}" in
  collect) shift; [[ $# -ge 2 ]] || { echo "usage: $0 collect BINARY DIR [EXTRA...]" >&2; exit 2; }; collect "$@" ;;
  install) shift; [[ $# -ge 2 ]] || { echo "usage: $0 install FROM DIR [PACKAGE...]" >&2; exit 2; }; install_runtime "$@" ;;
  *) echo "usage: $0 collect BINARY DIR [EXTRA...] | install FROM DIR [PACKAGE...]" >&2; exit 2 ;;
esac
