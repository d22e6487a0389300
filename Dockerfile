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
# What the image records (OCI labels, rn50 --version, run.json): scripts/build-image.sh passes them from git.
ARG RN50_REVISION=unknown
ARG RN50_CREATED=unknown
ARG GPU_IMAGE=nvcr.io/nvidia/pytorch:25.01-py3
ARG GPU_RUNTIME_IMAGE=ubuntu:24.04
ARG CPU_IMAGE=rn50-debian:bookworm

# --- the build stage's base ----------------------------------------------------------------------------------------
FROM ${GPU_IMAGE} AS build-gpu
# pip torch's LibTorch, as bench/gpu_session.sh builds on the GPU machines (RN50_TORCH=pip); its LibTorch and CUDA
# come with the image, so install-deps.sh leaves them out. TORCH_CUDA_ARCH_LIST keeps LibTorch's CMake from looking
# for a GPU, which a docker build does not see.
ENV RN50_TORCH=pip RN50_SKIP_TORCH=1 TORCH_CUDA_ARCH_LIST="8.0;9.0" RN50_RUNTIME_AS_NEEDED=""
# Libraries opened at run time, which ldd cannot see: LibTorch's own (NVRTC's stub among them), cuDNN's engines and
# NVRTC's builtins; and CUDA's forward-compatibility libraries (cuda-compat), for hosts whose driver is older than
# 570. A pattern that matches nothing fails the build (scripts/runtime-libs.sh): the image would fail at run time.
ENV RN50_RUNTIME_EXTRA="/usr/local/lib/python3*/dist-packages/torch/lib/*.so* /usr/lib/x86_64-linux-gnu/libcudnn*.so.9 /usr/local/cuda/lib64/libnvrtc*.so.*" \
    RN50_RUNTIME_COMPAT="/usr/local/cuda/compat/lib*/libcuda.so* /usr/local/cuda/compat/lib*/libnvidia-ptxjitcompiler.so*"

FROM ${CPU_IMAGE} AS build-cpu
ENV RN50_TORCH=debian RN50_SKIP_TORCH=0 RN50_RUNTIME_EXTRA="" RN50_RUNTIME_COMPAT=""
# Debian linked LibTorch without --as-needed: libtorch_cpu names 24 libraries it imports nothing from (every OpenCV
# module, FFmpeg, LMDB, ZeroMQ, OpenCL), whose dependencies (Qt, GDAL, Mesa...) loaded at every start. The image's
# copy loses those entries (scripts/runtime-libs.sh checks each: it must define none of the library's imports).
ENV RN50_RUNTIME_AS_NEEDED="libtorch_cpu.so.1.13"
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
# A docker build sees no GPU, so rn50's kernels are built for named architectures rather than "native": V100 (70),
# T4 (75), A100 (80), A10/L4's siblings (86, 89), H100/H200 (90), and PTX of the last for newer GPUs, which the driver
# compiles at the first start. The cpu base has no CUDA and ignores it. RN50_JOBS: parallel compile jobs.
ARG RN50_CUDA_ARCHS="70;75;80;86;89;90"
ARG RN50_JOBS=
ARG RN50_REVISION
ENV CCACHE_DIR=/ccache
RUN --mount=type=cache,target=/ccache \
    RN50_CMAKE_ARGS="-DRN50_CUDA_ARCHS=${RN50_CUDA_ARCHS} -DRN50_REVISION=${RN50_REVISION}" RN50_BUILD_TARGETS=rn50 \
    scripts/build.sh /src/build \
 && scripts/runtime-libs.sh collect /src/build/rn50 /opt/rn50 ${RN50_RUNTIME_EXTRA} \
 && scripts/runtime-libs.sh compat /opt/rn50 ${RN50_RUNTIME_COMPAT}

# --- the runtime stage's base --------------------------------------------------------------------------------------
FROM ${GPU_RUNTIME_IMAGE} AS runtime-gpu
# What the NVIDIA container toolkit reads: CUDA and NVML from the host's driver. The image's CUDA 12.8 needs driver
# 570, or on a datacenter GPU (A100, H100, H200, L4, T4...) an R535 or R550 driver with CUDA's forward-compatibility
# libraries, which the image carries (/opt/rn50/compat, the build image's cuda-compat): rn50-entry puts them first
# where the host's driver is older than 570. No NVIDIA_REQUIRE_CUDA: the toolkit would refuse R535 before that.
ENV NVIDIA_DRIVER_CAPABILITIES=compute,utility
# InfiniBand and RoCE for NCCL between nodes: the verbs library and its providers (mlx5 and the rest); an NCCL network
# plugin (AWS EFA's aws-ofi-nccl) goes in /opt/rn50/nccl-plugin, on NCCL's search path (docs/container.md).
RUN apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      libibverbs1 ibverbs-providers librdmacm1 > /dev/null && rm -rf /var/lib/apt/lists/*
ENV LD_LIBRARY_PATH=/opt/rn50/nccl-plugin

FROM ${CPU_IMAGE} AS runtime-cpu

# --- runtime -------------------------------------------------------------------------------------------------------
FROM runtime-${RN50_BASE} AS runtime
# The build stage's /opt/rn50 is mounted, not copied: the libraries that come as packages here never enter a layer.
RUN --mount=type=bind,from=build,source=/opt/rn50,target=/mnt/rn50 \
    --mount=type=bind,source=scripts/runtime-libs.sh,target=/mnt/runtime-libs.sh \
    bash /mnt/runtime-libs.sh install /mnt/rn50 /opt/rn50 python3
COPY configs /opt/rn50/configs
COPY bench/ablation.py /opt/rn50/bench/ablation.py
COPY scripts/rn50-entry /usr/local/bin/rn50-entry
# Not root: a user of its own (uid 10001) owns /opt/rn50/runs; to write into a bind mount as yourself, run with
# --user "$(id -u):$(id -g)" (docs/container.md).
RUN useradd --uid 10001 --home-dir /opt/rn50 --no-create-home --shell /usr/sbin/nologin rn50 \
 && mkdir -p /opt/rn50/runs && chown rn50 /opt/rn50/runs
ARG RN50_REVISION
ARG RN50_CREATED
LABEL org.opencontainers.image.title="rn50" \
      org.opencontainers.image.description="ResNet and other image-classifier training on LibTorch, each GPU speed-up a switch" \
      org.opencontainers.image.version="0.9.0" \
      org.opencontainers.image.revision="${RN50_REVISION}" \
      org.opencontainers.image.created="${RN50_CREATED}" \
      org.opencontainers.image.source="https://example.invalid/rn50"
# The runtime stage loads once at build time, on both bases: every library resolves and rn50 starts without the GPU
# driver, which a docker build does not have (NVML is opened at run time, where a command needs it).
RUN rn50 --version && rn50 doctor --limits > /dev/null
USER rn50
# configs/ is relative to here; mount a folder on /opt/rn50/runs to keep what a run writes (out_dir runs/...).
WORKDIR /opt/rn50
# rn50-entry execs rn50 (so rn50 is PID 1 and receives docker stop's SIGTERM), after choosing the CUDA libraries.
ENTRYPOINT ["rn50-entry"]
CMD ["--help"]
