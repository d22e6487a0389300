# Dockerfile: rn50's image, on one of two bases chosen by RN50_BASE (docs/container.md):
#   gpu (the default)  NVIDIA's PyTorch image: the LibTorch inside its pip torch, CUDA, cuDNN, NCCL, nvJPEG; the
#                      runtime stage on Ubuntu 24.04, the release that image is built on
#   cpu                Debian bookworm and Debian's LibTorch (CPU only); CPU_IMAGE names a bookworm image
#                      (scripts/container-test.sh makes rn50-debian:bookworm with mmdebstrap; debian:bookworm works too)
# The build stage installs and builds with scripts/install-deps.sh and scripts/build.sh, as a machine does; the
# runtime stage holds rn50, the shared libraries it loads (scripts/runtime-libs.sh), configs/ and the report tool
# bench/ablation.py with python3. Build it with scripts/build-image.sh: BuildKit (Docker 23 and later; DOCKER_BUILDKIT=1
# on 20.10) builds only the chosen base's stages, so the cpu image builds without NVIDIA's registry.
ARG RN50_BASE=gpu
ARG GPU_IMAGE=nvcr.io/nvidia/pytorch:25.01-py3
ARG GPU_RUNTIME_IMAGE=ubuntu:24.04
ARG CPU_IMAGE=rn50-debian:bookworm

# --- the build stage's base ----------------------------------------------------------------------------------------
FROM ${GPU_IMAGE} AS build-gpu
# pip torch's LibTorch, as bench/gpu_session.sh builds on the GPU machines (RN50_TORCH=pip); its LibTorch and CUDA
# come with the image, so install-deps.sh leaves them out. TORCH_CUDA_ARCH_LIST keeps LibTorch's CMake from looking
# for a GPU, which a docker build does not see.
ENV RN50_TORCH=pip RN50_SKIP_TORCH=1 TORCH_CUDA_ARCH_LIST="8.0;9.0"
# Libraries opened at run time, which ldd cannot see: LibTorch's own (NVRTC's stub among them), cuDNN's engines and
# NVRTC's builtins.
ENV RN50_RUNTIME_EXTRA="/usr/local/lib/python3*/dist-packages/torch/lib/*.so* /usr/lib/x86_64-linux-gnu/libcudnn*.so.9 /usr/local/cuda/lib64/libnvrtc*.so.*"

FROM ${CPU_IMAGE} AS build-cpu
ENV RN50_TORCH=debian RN50_SKIP_TORCH=0 RN50_RUNTIME_EXTRA=""
# OpenBLAS behind Debian's libblas.so.3, which is otherwise the reference BLAS: the doctor's FP32 matrix product 15x as
# fast in this image, the doctor in 73 s instead of 396; training the sample is unchanged within the noise
# (docs/container.md).
RUN apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      libopenblas0-pthread > /dev/null && rm -rf /var/lib/apt/lists/*

# --- build ---------------------------------------------------------------------------------------------------------
FROM build-${RN50_BASE} AS build
WORKDIR /src
# The dependencies first, in a layer of their own: a change to the sources does not install them again.
COPY scripts/install-deps.sh scripts/
RUN scripts/install-deps.sh && rm -rf /var/lib/apt/lists/*
COPY . .
# A docker build sees no GPU, so rn50's kernels are built for named architectures (A100: 80, H100/H200: 90) rather
# than "native"; the cpu base has no CUDA and ignores it. RN50_JOBS: parallel compile jobs (default: every core).
ARG RN50_CUDA_ARCHS="80;90"
ARG RN50_JOBS=
ENV CCACHE_DIR=/ccache
RUN --mount=type=cache,target=/ccache \
    RN50_CMAKE_ARGS="-DRN50_CUDA_ARCHS=${RN50_CUDA_ARCHS}" RN50_BUILD_TARGETS=rn50 scripts/build.sh /src/build \
 && scripts/runtime-libs.sh collect /src/build/rn50 /opt/rn50 ${RN50_RUNTIME_EXTRA}

# --- the runtime stage's base --------------------------------------------------------------------------------------
FROM ${GPU_RUNTIME_IMAGE} AS runtime-gpu
# What the NVIDIA container toolkit reads: CUDA and NVML from the host's driver, which must support CUDA 12.8.
ENV NVIDIA_DRIVER_CAPABILITIES=compute,utility NVIDIA_REQUIRE_CUDA="cuda>=12.8"

FROM ${CPU_IMAGE} AS runtime-cpu

# --- runtime -------------------------------------------------------------------------------------------------------
FROM runtime-${RN50_BASE} AS runtime
# The build stage's /opt/rn50 is mounted, not copied: the libraries that come as packages here never enter a layer.
RUN --mount=type=bind,from=build,source=/opt/rn50,target=/mnt/rn50 \
    --mount=type=bind,source=scripts/runtime-libs.sh,target=/mnt/runtime-libs.sh \
    bash /mnt/runtime-libs.sh install /mnt/rn50 /opt/rn50 python3
COPY configs /opt/rn50/configs
COPY bench/ablation.py /opt/rn50/bench/ablation.py
# configs/ is relative to here; mount a folder on /opt/rn50/runs to keep what a run writes (out_dir runs/...).
WORKDIR /opt/rn50
ENTRYPOINT ["rn50"]
CMD ["--help"]
