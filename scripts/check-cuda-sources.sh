#!/usr/bin/env bash
# Compiles the CUDA build's C++ sources (those CMake builds only against a CUDA LibTorch) with -fsyntax-only on the
# developer machine, against a copy of the pip LibTorch's include folder and the local CUDA toolkit, so that compile
# errors show before GPU time is spent. The .cu files are checked with nvcc.
#   TORCH_INCLUDE=DIR   the pip wheel's torch/include (on the GPU machine: tar czf - -C "$(python3 -c 'import torch,
#                       os; print(os.path.dirname(torch.__file__))')" include); default /work/torch211/include
#   NVJPEG_INCLUDE=DIR  a folder with nvjpeg.h where the CUDA install has none (Debian's non-free nvidia-cuda-dev:
#                       apt-get download it, dpkg-deb --fsys-tarfile it, take usr/include/nvjpeg.h)
#   NVML_INCLUDE=DIR    a folder with nvml.h where the CUDA install has none (CUDA's cuda_nvml_dev archive; pip's
#                       nvidia-nvml-dev): monitor/nvml_real.cpp is checked against it
#   scripts/check-cuda-sources.sh [FILE...]   (default: every CUDA-only source)
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
torch_include=${TORCH_INCLUDE:-/work/torch211/include}
cuda=${CUDA_HOME:-/usr/local/cuda}
[[ -d "$torch_include/ATen" ]] || { echo "no LibTorch headers in $torch_include (set TORCH_INCLUDE)"; exit 2; }
nvml_include=${NVML_INCLUDE:-$cuda/targets/x86_64-linux/include}
nvjpeg_include=${NVJPEG_INCLUDE:-$cuda/targets/x86_64-linux/include}
flags=(-std=c++17 -fsyntax-only -I"$root" -isystem "$torch_include" -isystem "$torch_include/torch/csrc/api/include"
       -isystem "$cuda/include" -isystem "$cuda/targets/x86_64-linux/include" -isystem "$nvml_include" -isystem "$nvjpeg_include"
       -DUSE_C10D_NCCL -DRN50_HAVE_NVJPEG=1
       -DRN50_SASS_ARCHS='"90"' -DRN50_PTX_ARCHS='"90"' -DRN50_TORCH_ARCHS='"sm_90"' -Wall -Wextra -Wno-unused-parameter)
if (($#)); then
  files=("$@")
else
  files=(cuda/cuda_support.cpp cuda/device_ops.cpp ops/fused_batch_norm_cuda.cpp ops/cudnn_handle.cpp ops/cudnn_graph.cpp
         ops/fused_conv_cuda.cpp ops/current_stream.cpp ops/fused_bottleneck.cpp ops/fused_batch_norm.cpp
         ops/max_pool_cuda.cpp ops/max_pool.cpp ops/weight_cast_cuda.cpp ops/weight_cast.cpp
         input/async_upload.cpp input/gpu_decode/gpu_decoder.cpp input/gpu_decode/gpu_decoder_routes.cpp
         bench/decode/gpu_decode_bench.cpp trainer/cuda_step_timer.cpp parallel/nccl_group.cpp monitor/nvml_real.cpp
         $(git ls-files 'tests/*cuda*.cpp' 'tests/input/gpu_decode/test_gpu_*.cpp' 'bench/ops/*.cpp')
         tests/parallel/test_data_parallel.cpp $(git ls-files '*.cu'))
fi
failed=0
skipped=()
for f in "${files[@]}"; do
  # nvJPEG's and NVML's headers come with some CUDA installs only (the GPU machine has them in pip's packages).
  if { grep -q '#include <nvjpeg.h>\|gpu_decoder_impl.h' "$f" && [[ ! -e "$nvjpeg_include/nvjpeg.h" ]]; } ||
     { grep -q '#include <nvml.h>' "$f" && [[ ! -e "$nvml_include/nvml.h" ]]; }; then
    skipped+=("$f")
    continue
  fi
  case $f in
    *.cu) out=$("$cuda/bin/nvcc" -std=c++17 -I"$root" -DRN50_SASS_ARCHS='"90"' -DRN50_PTX_ARCHS='"90"' -arch=sm_90 -c "$f" \
                -o /dev/null 2>&1 | grep -v '^$') ;;
    *) out=$(g++ "${flags[@]}" "$f" 2>&1 | grep -E 'error|warning: unused' | head -20) ;;
  esac
  if [[ -n "$out" ]]; then echo "== $f"; echo "$out"; failed=1; fi
done
((failed)) && exit 1
echo "$((${#files[@]} - ${#skipped[@]})) CUDA-build sources compile${skipped:+; not checked (no nvJPEG or NVML headers here): ${skipped[*]}}"
