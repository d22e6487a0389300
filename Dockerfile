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
RUN RN50_TORCH=pip scripts/build.sh /opt/rn50/build \
 && ln -s /opt/rn50/build/rn50 /usr/local/bin/rn50

ENTRYPOINT ["rn50"]
CMD ["--help"]
