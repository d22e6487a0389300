#!/usr/bin/env bash
# scripts/runtime-libs.sh: the shared libraries rn50 loads, carried from the Dockerfile's build stage to its slim
# runtime stage as files: the libraries themselves, not their packages, whose dependencies would bring in what rn50
# never uses (Debian's LibTorch links OpenCV's GUI and video modules: Qt, Mesa with LLVM, FFmpeg).
#   collect BINARY DIR [EXTRA...]  build stage: BINARY to DIR/bin/rn50 (without the build's library search path),
#                                  every library it and the EXTRA files (libraries opened at run time, which ldd cannot
#                                  see) load to DIR/lib, DIR/libs.txt and each Debian package's copyright file to
#                                  DIR/licenses. An EXTRA that is no file (a pattern that matched nothing, left as it
#                                  was by the shell) fails: a library missing from the image would fail at run time.
#   compat DIR [FILE...]           build stage: CUDA's forward-compatibility libraries to DIR/compat, listed too
#   install FROM DIR [PACKAGE...]  runtime stage, FROM being collect's DIR (bind-mounted, so that no library enters a
#                                  layer unless it stays): installs the PACKAGEs, then copies to DIR rn50, the compat
#                                  libraries and every library whose package this base lacks, lists the copies in
#                                  DIR/libs.txt; registers DIR/lib with the loader; fails if rn50 misses a library
#   check-host BINARY DIR          a GPU host with pip torch, outside Docker: collects what the GPU image would carry
#                                  from that pip install into DIR and runs rn50 --version, --help and train --mig list
#                                  with NVML hidden, doctor --quick and two training steps on the GPU with DIR/lib
#                                  alone on LD_LIBRARY_PATH; fails if a library is missing or any file is loaded from
#                                  the pip install or the build folder (docs/container.md)
# libs.txt, one library a line, for scanners (dpkg lists none of these files): "FILE PACKAGE VERSION SOURCE", FILE
# under DIR (lib/..., compat/...), SOURCE deb (a Debian or Ubuntu package), pip (a Python wheel: pip torch's and
# NVIDIA's libraries) or - (neither: PACKAGE and VERSION are - too).
# Never carried: glibc's libraries (every base has them), the GPU driver's (libcuda, libnvidia-*: the NVIDIA
# container toolkit mounts the host's, which must match its kernel module) and pip torch's Python bindings.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)

skip='^(linux-vdso\.so|ld-linux-x86-64\.so|libc\.so|libm\.so|libdl\.so|libpthread\.so|librt\.so|libresolv\.so|libutil\.so|libcuda\.so|libnvidia-|libnvcuvid\.so|libtorch_python\.so)'
header='# FILE PACKAGE VERSION SOURCE: the libraries rn50 carries as files (scripts/runtime-libs.sh); SOURCE deb|pip|-'

die() { echo "runtime-libs: $*" >&2; exit 1; }

# "PATH DISTRIBUTION VERSION" for each path on stdin that a Python distribution installed (its RECORD lists the
# file), "PATH - -" for the rest: pip torch's and NVIDIA's wheels. Without python3, all "- -".
pip_owners() {
  if ! command -v python3 > /dev/null; then awk '{print $0, "-", "-"}'; return; fi
  python3 -c '
import os, sys
from importlib import metadata
paths = [line.strip() for line in sys.stdin if line.strip()]
wanted = {os.path.realpath(path) for path in paths}
found = {}
for dist in metadata.distributions():
    for f in dist.files or ():
        if ".so" in f.name:
            real = os.path.realpath(str(dist.locate_file(f)))
            if real in wanted and real not in found:
                found[real] = (dist.metadata["Name"], dist.version)
for path in paths:
    print(path, *found.get(os.path.realpath(path), ("-", "-")))
'
}

# Edits an ELF file's dynamic section in place, as patchelf does: `edit_dynamic FILE` removes its library search
# paths (DT_RUNPATH, DT_RPATH): the build tree's rn50 searches LibTorch's folder in the pip install, where it would
# find any library the collected folder lacks. `edit_dynamic FILE NAME...` removes those DT_NEEDED entries.
edit_dynamic() {
  python3 - "$@" <<'PY'
import struct, sys
path, names = sys.argv[1], set(sys.argv[2:])
data = bytearray(open(path, "rb").read())
if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
    sys.exit(f"runtime-libs: {path}: not a 64-bit little-endian ELF file")
phoff, = struct.unpack_from("<Q", data, 0x20)
phentsize, phnum = struct.unpack_from("<HH", data, 0x36)
dynamic, loads = None, []
for i in range(phnum):
    p_type, _, p_offset, p_vaddr, _, p_filesz = struct.unpack_from("<IIQQQQ", data, phoff + i * phentsize)
    if p_type == 1:  # PT_LOAD: where the string table's address lies in the file
        loads.append((p_vaddr, p_offset, p_filesz))
    if p_type == 2:  # PT_DYNAMIC
        dynamic = (p_offset, p_filesz)
if dynamic is None:
    sys.exit(0)
entries = []
for offset in range(dynamic[0], dynamic[0] + dynamic[1], 16):
    tag, value = struct.unpack_from("<qQ", data, offset)
    if tag == 0:
        break
    entries.append((tag, value))
strtab = next(value for tag, value in entries if tag == 5)  # DT_STRTAB
strtab = next(o + strtab - v for v, o, n in loads if v <= strtab < v + n)
def string(value):
    return data[strtab + value:data.index(b"\0", strtab + value)].decode()
if names:
    kept = [(t, v) for t, v in entries if not (t == 1 and string(v) in names)]  # DT_NEEDED
    missing = names - {string(v) for t, v in entries if t == 1}
    if missing:
        sys.exit(f"runtime-libs: {path} does not need {' '.join(sorted(missing))}")
else:
    kept = [(t, v) for t, v in entries if t not in (15, 29)]  # DT_RPATH, DT_RUNPATH
for i in range(dynamic[1] // 16):
    struct.pack_into("<qQ", data, dynamic[0] + 16 * i, *(kept[i] if i < len(kept) else (0, 0)))
open(path, "wb").write(bytes(data))
PY
}

# The libraries FILE names as needed (DT_NEEDED) that define none of the symbols it imports: what a link with
# --as-needed would have left out. Debian's libtorch_cpu.so names 23 such (every OpenCV module, FFmpeg, LMDB, LevelDB,
# ZeroMQ, OpenCL), whose own dependencies (Qt, GDAL, Mesa...) made 287 shared objects load at every start.
unneeded() {
  local file=$1 name path imported
  imported=$(nm -D --undefined-only "$file" | awk '{print $NF}' | sed 's/@.*//' | sort -u)
  local -A where=()
  while read -r name path; do where[$name]=$path; done < <(ldd "$file" | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}')
  for name in $(readelf -d "$file" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'); do
    path=${where[$name]:-}
    [[ -n "$path" ]] || continue  # the loader itself
    # Counted whole: grep -q would stop reading early, and pipefail would take the broken pipe for "none".
    if [[ "$(nm -D --defined-only "$path" | awk '{print $NF}' | sed 's/@.*//' | sort -u |
             comm -12 - <(echo "$imported") | wc -l)" == 0 ]]; then
      echo "$name"
    fi
  done
}

# The libraries `file` needs that the loader cannot find, the GPU driver's left out: a docker build has no driver.
missing() { ldd "$1" | awk '$2 == "=>" && $3 == "not" {print $1}' | grep -Ev "$skip" || true; }
driver_missing() { ldd "$1" | awk '$2 == "=>" && $3 == "not" {print $1}' | grep -E "$skip" || true; }

installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }

# Copies `real` to `target`; RN50_COLLECT_LINKS=1 makes a hard link where the file system allows (check-host: the
# pip install's gigabytes need not be copied to prove the set complete).
carry() {
  local real=$1 target=$2
  if [[ "${RN50_COLLECT_LINKS:-0}" == 1 ]] && ln "$real" "$target" 2>/dev/null; then return; fi
  cp -L "$real" "$target"
}

# "FILE PACKAGE VERSION SOURCE" for each "FILE PATH" line on stdin: dpkg's package first (dpkg may know the file under
# /usr or without it, or only its link's target), then a wheel's. One dpkg-query for all: one a file took minutes.
list_owners() {
  local file path p pkg
  local -a files=() paths=() candidates=()
  while read -r file path; do
    files+=("$file"); paths+=("$path")
    candidates+=("$(realpath "$path")" "$path" "/usr$path" "${path#/usr}")
  done
  ((${#files[@]})) || return 0
  local -A deb=() version=()
  if command -v dpkg-query > /dev/null; then
    while IFS= read -r line; do
      [[ "$line" == diversion* ]] && continue
      pkg=${line%%:*}; pkg=${pkg%%,*}; p=${line#*: }
      [[ -n "${deb[$p]:-}" ]] || deb[$p]=$pkg
    done < <(dpkg-query -S "${candidates[@]}" 2>/dev/null || true)
    while read -r pkg p; do version[$pkg]=$p; done < <(printf '%s\n' "${deb[@]}" | sort -u |
      xargs -r dpkg-query -W -f='${Package} ${Version}\n' 2>/dev/null | sort -u)
  fi
  local -a unowned=()
  local -A file_of=()
  local i
  for i in "${!files[@]}"; do
    pkg=""
    for p in "${candidates[@]:$((4 * i)):4}"; do pkg=${deb[$p]:-}; [[ -n "$pkg" ]] && break; done
    if [[ -n "$pkg" ]]; then
      echo "${files[$i]} $pkg ${version[$pkg]:--} deb"
    else
      unowned+=("${paths[$i]}"); file_of[${paths[$i]}]=${files[$i]}
    fi
  done
  ((${#unowned[@]})) || return 0
  local name ver
  while read -r path name ver; do
    if [[ "$name" == - ]]; then echo "${file_of[$path]} - - -"; else echo "${file_of[$path]} $name $ver pip"; fi
  done < <(printf '%s\n' "${unowned[@]}" | pip_owners)
}

copy_license() {  # a Debian package's copyright file to DIR/licenses
  local pkg=$1 dir=$2
  if [[ "$pkg" != - && -f "/usr/share/doc/$pkg/copyright" ]]; then
    mkdir -p "$dir/licenses"
    cp "/usr/share/doc/$pkg/copyright" "$dir/licenses/$pkg"
  fi
}

collect() {
  local binary=$1 dir=$2
  shift 2
  mkdir -p "$dir/bin" "$dir/lib"
  install -m 755 "$binary" "$dir/bin/rn50"
  edit_dynamic "$dir/bin/rn50"
  local files=("$binary") f
  for f in "$@"; do
    [[ -e "$f" ]] || die "$f: no such file (a library pattern that matches nothing?)"
    [[ ! "$(basename "$f")" =~ $skip ]] && files+=("$f")
  done
  # RN50_RUNTIME_AS_NEEDED: libraries linked without --as-needed; their copies lose the needed-library entries that
  # define none of their imports, and the closure below is taken from the copies (ldd -r checks that nothing else
  # relied on what they pulled in).
  declare -A seen=() original=()
  local name path trimmed
  trimmed=$(mktemp -d)
  for name in ${RN50_RUNTIME_AS_NEEDED:-}; do
    path=$(ldd "$binary" | awk -v n="$name" '$1 == n && $3 ~ /^\// {print $3}')
    [[ -n "$path" ]] || die "RN50_RUNTIME_AS_NEEDED: $binary does not load $name"
    cp -L "$path" "$trimmed/$name"
    local unused
    unused=$(unneeded "$path" | tr '\n' ' ')
    if [[ -n "$unused" ]]; then
      # shellcheck disable=SC2086
      edit_dynamic "$trimmed/$name" $unused
      echo "runtime-libs: $name without $(wc -w <<< "$unused") libraries it imports nothing from: $unused"
    fi
    original[$name]=$path
  done
  export LD_LIBRARY_PATH="$trimmed${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  if [[ -n "${RN50_RUNTIME_AS_NEEDED:-}" ]]; then
    local unresolved
    unresolved=$(ldd -r "$binary" 2>&1 | sed 's/^[[:space:]]*//' | grep -E "undefined symbol|not found" |
                 grep -Ev "$skip" | head -5 || true)
    [[ -z "$unresolved" ]] || die "$binary with the trimmed libraries: $unresolved"
  fi
  for f in "${files[@]}"; do
    if [[ "$f" != "$binary" ]]; then seen[$(basename "$f")]=$f; fi
    if [[ -n "$(missing "$f")" ]]; then die "$f misses $(missing "$f" | tr '\n' ' ')"; fi
    while read -r name path; do
      [[ -n "$path" ]] && seen[$name]=$path
    done < <(ldd "$f" | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}')
  done
  # real file -> the name it was copied under: other names of it become links, not copies. Longest names first, so
  # that the file goes under its most specific name (libnvrtc.so.12.8.61, not libnvrtc.so).
  declare -A copied=()
  local listing=()
  for name in $(printf '%s\n' "${!seen[@]}" | awk '{print length($0), $0}' | sort -k1,1nr -k2 | cut -d' ' -f2); do
    [[ "$name" =~ $skip ]] && continue
    local real
    real=$(realpath "${seen[$name]}")
    if [[ -n "${copied[$real]:-}" ]]; then
      ln -sf "${copied[$real]}" "$dir/lib/$name"
    else
      carry "$real" "$dir/lib/$name"
      copied[$real]=$name
    fi
    listing+=("lib/$name ${original[$name]:-${seen[$name]}}")
  done
  rm -rf "$trimmed"
  { echo "$header"; printf '%s\n' "${listing[@]}" | list_owners | sort; } > "$dir/libs.txt"
  local pkg
  while read -r _ pkg _ source; do
    if [[ "$source" == deb ]]; then copy_license "$pkg" "$dir"; fi
  done < <(grep -v '^#' "$dir/libs.txt")
  count_source() { awk -v s="$1" '$4 == s' "$dir/libs.txt" | wc -l; }
  echo "runtime-libs: $(grep -vc '^#' "$dir/libs.txt") libraries: $(count_source deb) of Debian packages," \
       "$(count_source pip) of wheels, $(count_source -) of neither"
}

compat() {
  local dir=$1 f
  shift
  (($#)) || return 0
  mkdir -p "$dir/compat"
  local listing=()
  local -A carried=()
  for f in "$@"; do
    [[ -e "$f" || -L "$f" ]] || die "$f: no such file (a compat pattern that matches nothing?)"
    [[ -z "${carried[$(basename "$f")]:-}" ]] || continue  # lib/ and lib.real/ may both hold it
    carried[$(basename "$f")]=1
    cp -a "$f" "$dir/compat/"  # a link stays a link (libcuda.so.1 -> libcuda.so.570.124.06), listed as the file is
    listing+=("compat/$(basename "$f") $f")
  done
  [[ -f "$dir/libs.txt" ]] || echo "$header" > "$dir/libs.txt"
  printf '%s\n' "${listing[@]}" | list_owners >> "$dir/libs.txt"
  echo "runtime-libs: ${#listing[@]} forward-compatibility libraries in $dir/compat"
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
  [[ -d "$from/compat" ]] && cp -a "$from/compat" "$dir/compat"
  echo "$header" > "$dir/libs.txt"
  local file pkg version source copies=0 kept=0
  while read -r file pkg version source; do
    [[ "$file" == '#'* ]] && continue
    # A package this base has serves as it is (libstdc++6, zlib1g: a library keeps its ABI within a soname).
    if [[ "$source" == deb ]] && installed "$pkg"; then
      kept=$((kept + 1))
      continue
    fi
    echo "$file $pkg $version $source" >> "$dir/libs.txt"  # dpkg does not list this file here: libs.txt does
    [[ "$file" == lib/* ]] || continue  # compat/ came whole
    cp -a "$from/$file" "$dir/$file"  # a link stays a link: its target is a line of its own
    copies=$((copies + 1))
    if [[ "$source" == deb && -f "$from/licenses/$pkg" ]]; then cp "$from/licenses/$pkg" "$dir/licenses/$pkg"; fi
  done < "$from/libs.txt"
  # Named to sort after the system's own folders: a copy never shadows a library the system has.
  echo "$dir/lib" > /etc/ld.so.conf.d/zz-rn50.conf
  ldconfig
  ln -sf "$dir/bin/rn50" /usr/local/bin/rn50
  echo "runtime-libs: $copies libraries copied ($(du -sh "$dir/lib" | cut -f1)), $kept from this base's packages"
  if [[ -n "$(missing "$dir/bin/rn50")" ]]; then
    die "rn50 misses $(missing "$dir/bin/rn50" | tr '\n' ' ')in the runtime stage"
  fi
  # A library of this base older than the build's (a symbol version it lacks), found without starting rn50.
  local versions
  versions=$(ldd -r "$dir/bin/rn50" 2>&1 | grep "version .* not found" || true)
  [[ -z "$versions" ]] || die "$versions"
  [[ -z "$(driver_missing "$dir/bin/rn50")" ]] ||
    die "rn50 cannot start without the GPU driver's $(driver_missing "$dir/bin/rn50" | tr '\n' ' ')(linked, not" \
        "opened at run time)"
  rn50 --help > /dev/null  # loads every library and checks their symbol versions
}

check_host() {
  local binary=$1 dir=$2 started=$SECONDS
  [[ -x "$binary" ]] || die "$binary: no rn50 binary"
  command -v python3 > /dev/null || die "no python3 (the pip install of torch is found through it)"
  local torch_dir site build
  torch_dir=$(python3 -c 'import os, torch; print(os.path.dirname(torch.__file__))') || die "python3 has no torch"
  site=$(dirname "$torch_dir")
  build=$(cd "$(dirname "$binary")" && pwd)
  case "$(realpath -m "$dir")/" in
    "$build"/* | "$site"/*) die "$dir: a folder outside $build and $site (what is loaded from those fails the check)" ;;
  esac
  rm -rf "$dir"
  mkdir -p "$dir/logs" "$dir/work"
  dir=$(cd "$dir" && pwd)
  # What the gpu image's RN50_RUNTIME_EXTRA names in NVIDIA's image, at pip's places: LibTorch's own libraries,
  # cuDNN's engines, NVRTC and its builtins. The build's OpenCV (RN50_OPENCV_DEBS) resolves as in the build's runs.
  local extra=("$torch_dir"/lib/*.so* "$site"/nvidia/*/lib/libcudnn*.so.9 "$site"/nvidia/*/lib/libnvrtc*.so*)
  local opencv=$build/opencv/usr/lib/x86_64-linux-gnu
  RN50_COLLECT_LINKS=1 LD_LIBRARY_PATH="$opencv${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
    collect "$binary" "$dir" "${extra[@]}"
  echo "runtime-libs: collected into $dir in $((SECONDS - started)) s ($(du -shL "$dir/lib" | cut -f1) in lib/)"

  # Nothing from this environment but DIR/lib (no LD_LIBRARY_PATH of the build's OpenCV, no CUDA_HOME), and the
  # machine's own settings of CUDA, NCCL and NVSHMEM (the GPU machines' rules on NVLink multicast).
  local lib=$dir/lib rn50=$dir/bin/rn50 failed=0 hidden=librn50-hidden-nvml.so.1
  local clean=(env -i PATH=/usr/bin:/bin HOME="${HOME:-/tmp}" LD_LIBRARY_PATH="$lib" LD_DEBUG=libs)
  local setting
  while read -r setting; do
    clean+=("$setting=${!setting}")
  done < <(compgen -e | grep -E '^(CUDA_VISIBLE|CUDA_DEVICE|NCCL_|NVSHMEM_|TORCH_SYMM_MEM_)')
  local driver
  driver=$(LD_LIBRARY_PATH=$lib ldd "$rn50" | awk '{print $1}' | grep -E '^(libcuda\.so|libnvidia-)' | tr '\n' ' ' ||
           true)
  if [[ -n "$driver" ]]; then
    echo "runtime-libs: FAILED: rn50 links the driver's ${driver}(it cannot start without the driver)"; failed=1
  else
    echo "runtime-libs: ok   rn50 links no driver library (libcuda, libnvidia-*)"
  fi
  local f
  for f in "$lib"/*; do
    local needs
    needs=$(readelf -d "$f" 2>/dev/null | sed -n 's/.*NEEDED.*\[\(libcuda\.so[^]]*\|libnvidia-[^]]*\)\].*/\1/p' |
            tr '\n' ' ')
    [[ -z "$needs" ]] || echo "runtime-libs: note $(basename "$f") needs ${needs}(loaded only when it is opened)"
  done
  # run NAME SECONDS EXPECTED_EXIT PATTERN COMMAND...: COMMAND's exit must be EXPECTED_EXIT and its output must match
  # PATTERN (grep -E); its log in DIR/logs/NAME.log, the loader's in DIR/logs/NAME.ld.PID.
  run() {
    local name=$1 limit=$2 expect=$3 pattern=$4 code=0 t0=$SECONDS
    shift 4
    (cd "$dir/work" && timeout "$limit" "${clean[@]}" LD_DEBUG_OUTPUT="$dir/logs/$name.ld" "$@") \
      > "$dir/logs/$name.log" 2>&1 || code=$?
    if [[ "$code" != "$expect" ]] || ! grep -qE "$pattern" "$dir/logs/$name.log"; then
      echo "runtime-libs: FAILED: $name: exit $code (expected $expect), output matching '$pattern' expected; its end:"
      tail -n 6 "$dir/logs/$name.log" | sed 's/^/    /'
      failed=1
    else
      echo "runtime-libs: ok   $name ($((SECONDS - t0)) s):" \
           "$(grep -m1 -E "$pattern" "$dir/logs/$name.log" | cut -c1-110)"
    fi
  }
  run version 20 0 '^LibTorch' "$rn50" --version
  run help-without-nvml 20 0 '^usage: rn50' env RN50_NVML_LIBRARY=$hidden "$rn50" --help
  run mig-list-without-nvml 60 2 "NVML is unavailable: cannot open $hidden: " \
    env RN50_NVML_LIBRARY=$hidden "$rn50" train --mig list --device cuda:0
  run doctor 120 0 '^gpu +MIG ' "$rn50" doctor --quick --device cuda:0  # the MIG row: NVML opened, found the GPU
  # configs/optimized.yaml's switches (cuDNN's graph engines and NVRTC for fusion: conv, a CUDA graph), without the
  # autotuning, which takes time and loads nothing more.
  run train 120 0 'NVML every 100 ms' "$rn50" train --config "$root/configs/optimized.yaml" --data synthetic \
    --device cuda:0 --batch-size 64 --synthetic-images 256 --epochs 1 --max-steps 2 --validate=off \
    --cudnn-benchmark=off --out-dir "$dir/work/run"
  # A host without the driver at all, as a container run without --gpus: the driver's libcuda and NVML made empty
  # files in a mount namespace of the command's own (root, or user namespaces), rn50's commands that need no GPU
  # run, and CPU training. Skipped, with the reason, where neither is allowed.
  cat > "$dir/hide-driver.sh" <<'SH'
#!/bin/bash
# Runs "$@" with the NVIDIA driver's libcuda and libnvidia-ml bound to /dev/null (inside unshare --mount).
for f in $(/sbin/ldconfig -p | awk '/(libcuda|libnvidia-ml)\.so/ {print $NF}' | xargs -r realpath | sort -u); do
  mount --bind /dev/null "$f" || exit 97
done
exec "$@"
SH
  chmod +x "$dir/hide-driver.sh"
  local namespace=()
  if unshare --mount --propagation private true 2> /dev/null; then
    namespace=(unshare --mount --propagation private "$dir/hide-driver.sh")
  elif unshare --user --map-root-user --mount true 2> /dev/null; then
    namespace=(unshare --user --map-root-user --mount "$dir/hide-driver.sh")
  fi
  if ((${#namespace[@]})); then
    run no-driver-help 20 0 '^usage: rn50' "${namespace[@]}" "$rn50" --help
    run no-driver-limits 20 0 'usable cores' "${namespace[@]}" "$rn50" doctor --limits
    run no-driver-mig-list 20 2 'NVML is unavailable: cannot open libnvidia-ml.so.1: ' \
      "${namespace[@]}" "$rn50" train --mig list
    run no-driver-cpu-train 60 0 'epoch 1/1' "${namespace[@]}" "$rn50" train --data synthetic --device auto \
      --model resnet18 --image-size 32 --val-resize 32 --batch-size 4 --synthetic-images 8 --epochs 1 \
      --validate=off --out-dir "$dir/work/cpu-run"
  else
    echo "runtime-libs: skip no-driver: unshare --mount is not allowed here (neither root nor user namespaces)"
  fi
  # Every file any of them loaded, from the loader's own log: none from the pip install or the build folder.
  local loaded outside
  loaded=$(cat "$dir"/logs/*.ld.* 2>/dev/null | sed -n 's/.*calling init: //p' | sort -u)
  [[ -n "$loaded" ]] || { echo "runtime-libs: FAILED: no loader log (LD_DEBUG)"; failed=1; }
  outside=$(grep -E "^($site|$build)/" <<< "$loaded" || true)
  if [[ -n "$outside" ]]; then
    echo "runtime-libs: FAILED: loaded from the pip install or the build folder:"; sed 's/^/    /' <<< "$outside"
    failed=1
  else
    echo "runtime-libs: ok   $(grep -c "^$lib/" <<< "$loaded") files loaded from $lib, the rest from the system:" \
         "$(grep -v "^$lib/" <<< "$loaded" | xargs -n1 basename | tr '\n' ' ')"
  fi
  ((failed == 0)) || die "check-host FAILED after $((SECONDS - started)) s (logs: $dir/logs)"
  echo "runtime-libs: check-host PASSED in $((SECONDS - started)) s: $(grep -vc '^#' "$dir/libs.txt") libraries" \
       "($(awk '$4 == "pip"' "$dir/libs.txt" | wc -l) of wheels) in $lib, nothing loaded from $site or $build"
}

case "${1:-}" in
  collect) shift; [[ $# -ge 2 ]] || { echo "usage: $0 collect BINARY DIR [EXTRA...]" >&2; exit 2; }; collect "$@" ;;
  compat) shift; [[ $# -ge 1 ]] || { echo "usage: $0 compat DIR [FILE...]" >&2; exit 2; }; compat "$@" ;;
  install) shift; [[ $# -ge 2 ]] || { echo "usage: $0 install FROM DIR [PACKAGE...]" >&2; exit 2; }; install_runtime "$@" ;;
  check-host) shift; [[ $# -eq 2 ]] || { echo "usage: $0 check-host BINARY DIR" >&2; exit 2; }; check_host "$@" ;;
  *) echo "usage: $0 collect BINARY DIR [EXTRA...] | compat DIR [FILE...] | install FROM DIR [PACKAGE...] |" \
          "check-host BINARY DIR" >&2; exit 2 ;;
esac
