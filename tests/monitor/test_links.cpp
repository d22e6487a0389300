// tests/monitor/test_links.cpp: the links line against a fake NVML whose GPU order differs from CUDA's.
#include <gtest/gtest.h>

#include "monitor/links.h"
#include "tests/monitor/fake_nvml.h"

namespace rn50::monitor {
namespace {

TEST(GpuLinks, NamesNvlinkAndPeerAccessMatchingGpusByUuid) {
  testing::FakeNvml nvml;
  nvml.gpus.resize(3);
  nvml.gpus[0].uuid = "GPU-c";
  nvml.gpus[1].uuid = "GPU-a";
  nvml.gpus[1].active_nvlinks = 18;
  nvml.gpus[2].uuid = "GPU-b";
  nvml.nvlink[{1, 2}] = true;   // a-b
  nvml.nvlink[{0, 1}] = false;  // c-a
  // CUDA sees a, b, c (CUDA_VISIBLE_DEVICES reorders; NVML does not).
  const auto peer = [](int a, int b) { return !(a == 0 && b == 2); };
  EXPECT_EQ(describe_gpu_links(&nvml, {"GPU-a", "GPU-b", "GPU-c"}, peer),
            "GPU0-GPU1 NVLink (18 links), peer access; GPU0-GPU2 no NVLink (PCIe or the host), no peer access; "
            "GPU1-GPU2 link type unknown, peer access");
}

TEST(GpuLinks, AnNvmlFailureIsDescribedNotThrown) {
  testing::FakeNvml nvml;
  nvml.gpus.resize(2);
  nvml.gpus[0].uuid = "GPU-a";
  nvml.gpus[1].uuid = "GPU-b";
  nvml.nvlink[{0, 1}] = true;
  nvml.nvlink_throws = true;
  EXPECT_EQ(describe_gpu_links(&nvml, {"GPU-a", "GPU-b"}, [](int, int) { return true; }),
            "GPU0-GPU1 link type unknown (NVML: fake NVML: link query failed), peer access");
}

TEST(GpuLinks, WithoutNvmlOrWithOneGpu) {
  const auto peer = [](int, int) { return true; };
  EXPECT_EQ(describe_gpu_links(nullptr, {"GPU-a", "GPU-b"}, peer), "GPU0-GPU1 link type unknown, peer access");
  testing::FakeNvml nvml;
  EXPECT_EQ(describe_gpu_links(&nvml, {"GPU-a"}, peer), "");
}

}  // namespace
}  // namespace rn50::monitor
