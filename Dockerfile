# rn50 with CUDA: NVIDIA's PyTorch image (Ubuntu 24.04, CUDA toolkit, cuDNN, NCCL, nvJPEG, NVML, and the
# LibTorch inside its pip torch); the other dependencies from apt; built by scripts/build.sh, the same
# script that builds rn50 on the GPU machine.
FROM nvcr.io/nvidia/pytorch:25.01-py3

RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      ninja-build libopencv-dev libjpeg-turbo8-dev libcxxopts-dev libspdlog-dev libyaml-cpp-dev \
      nlohmann-json3-dev libgtest-dev \
 && rm -rf /var/lib/apt/lists/*

WORKDIR /opt/rn50
COPY . .
# A docker build sees no GPU, so rn50's kernels are built for named architectures (A100: 80, H100/H200: 90)
# rather than the default "native"; TORCH_CUDA_ARCH_LIST keeps LibTorch's CMake from looking for a GPU too.
ARG RN50_CUDA_ARCHS="80;90"
ENV TORCH_CUDA_ARCH_LIST="8.0;9.0"
RUN RN50_TORCH=pip RN50_CMAKE_ARGS="-DRN50_CUDA_ARCHS=${RN50_CUDA_ARCHS}" scripts/build.sh /opt/rn50/build \
 && ln -s /opt/rn50/build/rn50 /usr/local/bin/rn50

ENTRYPOINT ["rn50"]
CMD ["--help"]
