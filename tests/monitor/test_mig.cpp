// tests/monitor/test_mig.cpp: tests of the --mig logic against FakeNvml: listing, selection by index and UUID, every
// refusal, the multi-process refusal and CUDA_VISIBLE_DEVICES.
#include "monitor/mig.h"

#include <cstdlib>
#include <string>

#include <gtest/gtest.h>

#include "core/errors.h"
#include "tests/monitor/fake_nvml.h"

namespace rn50::monitor {
namespace {

using testing::FakeGpu;
using testing::FakeMig;
using testing::FakeNvml;

constexpr uint64_t kGiB = 1024ull * 1024 * 1024;

FakeMig instance(const std::string& uuid, const std::string& profile, uint64_t memory_gib) {
  FakeMig mig{uuid, "NVIDIA H100 80GB HBM3 MIG " + profile, {}};
  mig.readings.memory = MemoryInfo{0, memory_gib * kGiB};
  return mig;
}

// GPU 0: MIG on, instances in slots 0, 3 and 5 (holes between). GPU 1: MIG off. GPU 2: no MIG support.
// GPU 3: MIG on after the next reset. GPU 4: MIG on, no instances.
class Mig : public ::testing::Test {
 protected:
  Mig() {
    FakeGpu partitioned{"NVIDIA H100 80GB HBM3",
                        "GPU-00000000-0000-0000-0000-000000000000",
                        MigMode{true, true},
                        7,
                        {},
                        {},
                        std::nullopt};
    partitioned.mig_slots[0] = instance("MIG-aaaaaaaa-0000-0000-0000-000000000001", "3g.40gb", 40);
    partitioned.mig_slots[3] = instance("MIG-bbbbbbbb-0000-0000-0000-000000000002", "2g.20gb", 20);
    partitioned.mig_slots[5] = instance("MIG-cccccccc-0000-0000-0000-000000000003", "1g.10gb", 10);
    nvml.gpus.push_back(partitioned);
    nvml.gpus.push_back(
        {"NVIDIA H200", "GPU-11111111-0000-0000-0000-000000000000", MigMode{false, false}, 7, {}, {}, std::nullopt});
    nvml.gpus.push_back(
        {"NVIDIA GeForce RTX 3090", "GPU-22222222-0000-0000-0000-000000000000", std::nullopt, 0, {}, {}, std::nullopt});
    nvml.gpus.push_back({"NVIDIA A100-SXM4-80GB",
                         "GPU-33333333-0000-0000-0000-000000000000",
                         MigMode{false, true},
                         7,
                         {},
                         {},
                         std::nullopt});
    nvml.gpus.push_back(
        {"NVIDIA H100 PCIe", "GPU-44444444-0000-0000-0000-000000000000", MigMode{true, true}, 7, {}, {}, std::nullopt});
  }
  FakeNvml nvml;
};

// The ConfigError message of select_mig, checked to be one line naming the key.
std::string refusal(FakeNvml& nvml, int gpu, const std::string& spec) {
  try {
    select_mig(nvml, gpu, spec);
  } catch (const ConfigError& e) {
    const std::string message = e.what();
    EXPECT_EQ(message.rfind("config key 'mig': ", 0), 0u) << message;
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
    return message;
  }
  ADD_FAILURE() << "select_mig(" << gpu << ", " << spec << ") did not refuse";
  return "";
}

TEST_F(Mig, ListsInstancesInSlotOrderSkippingEmptySlots) {
  const auto instances = list_mig_instances(nvml, 0);
  ASSERT_EQ(instances.size(), 3u);
  EXPECT_EQ(instances[0].index, 0u);
  EXPECT_EQ(instances[1].index, 1u);
  EXPECT_EQ(instances[2].index, 2u);
  EXPECT_EQ(instances[1].device, (NvmlDevice{0, 3u}));
  EXPECT_EQ(instances[2].uuid, "MIG-cccccccc-0000-0000-0000-000000000003");
  EXPECT_EQ(instances[0].name, "NVIDIA H100 80GB HBM3 MIG 3g.40gb");
  EXPECT_EQ(instances[0].memory_bytes, 40 * kGiB);
  EXPECT_TRUE(list_mig_instances(nvml, 1).empty());  // MIG off
  EXPECT_TRUE(list_mig_instances(nvml, 2).empty());  // no MIG
}

TEST_F(Mig, DescribeShowsATableOfInstances) {
  const std::string table = describe_mig(nvml, 0);
  EXPECT_NE(table.find("GPU 0 (NVIDIA H100 80GB HBM3): MIG enabled, 3 instances"), std::string::npos) << table;
  EXPECT_NE(table.find("index"), std::string::npos);
  EXPECT_NE(table.find("uuid"), std::string::npos);
  EXPECT_NE(table.find("memory"), std::string::npos);
  EXPECT_NE(table.find("MIG-bbbbbbbb-0000-0000-0000-000000000002"), std::string::npos);
  EXPECT_NE(table.find("NVIDIA H100 80GB HBM3 MIG 1g.10gb"), std::string::npos);
  EXPECT_NE(table.find("40.0 GiB"), std::string::npos);
  // One header line, one column-title line, one line per instance (no final newline); the instance rows start with
  // their index.
  EXPECT_EQ(std::count(table.begin(), table.end(), '\n'), 4);
  EXPECT_NE(table.back(), '\n');
  EXPECT_NE(table.find("\n  2  "), std::string::npos) << table;
}

TEST_F(Mig, DescribeSaysWhyAGpuHasNoUsableInstances) {
  EXPECT_NE(describe_mig(nvml, 1).find("MIG is disabled on GPU 1 (NVIDIA H200)"), std::string::npos);
  EXPECT_NE(describe_mig(nvml, 2).find("does not support MIG"), std::string::npos);
  EXPECT_NE(describe_mig(nvml, 3).find("waits for a GPU reset"), std::string::npos);
  EXPECT_NE(describe_mig(nvml, 4).find("no MIG instances"), std::string::npos);
  EXPECT_EQ(describe_mig(nvml, 2).find('\n'), std::string::npos);  // one line: a row of the doctor's table
  EXPECT_THROW(describe_mig(nvml, 9), ConfigError);
}

TEST_F(Mig, DescribeNotesThatMigWillBeDisabledAtTheNextReset) {
  nvml.gpus[0].mig_mode = MigMode{true, false};
  EXPECT_NE(describe_mig(nvml, 0).find("will be disabled at the next GPU reset"), std::string::npos);
  EXPECT_EQ(select_mig(nvml, 0, "0"), "MIG-aaaaaaaa-0000-0000-0000-000000000001");  // usable until then
}

TEST_F(Mig, SelectsByIndexAmongExistingInstances) {
  EXPECT_EQ(select_mig(nvml, 0, "0"), "MIG-aaaaaaaa-0000-0000-0000-000000000001");
  EXPECT_EQ(select_mig(nvml, 0, "1"), "MIG-bbbbbbbb-0000-0000-0000-000000000002");  // slot 3
  EXPECT_EQ(select_mig(nvml, 0, "2"), "MIG-cccccccc-0000-0000-0000-000000000003");  // slot 5
}

TEST_F(Mig, SelectsByUuidReturningNvmlsSpelling) {
  const std::string wanted = "MIG-bbbbbbbb-0000-0000-0000-000000000002";
  EXPECT_EQ(select_mig(nvml, 0, "MIG-bbbbbbbb-0000-0000-0000-000000000002"), wanted);
  EXPECT_EQ(select_mig(nvml, 0, "mig-BBBBBBBB-0000-0000-0000-000000000002"), wanted);
}

TEST_F(Mig, RefusesWhenMigIsDisabledAndSaysWhoEnablesIt) {
  const std::string message = refusal(nvml, 1, "0");
  EXPECT_NE(message.find("MIG is disabled on GPU 1"), std::string::npos) << message;
  EXPECT_NE(message.find("nvidia-smi -i 1 -mig 1"), std::string::npos) << message;
  EXPECT_NE(message.find("administrator"), std::string::npos) << message;
  EXPECT_NE(message.find("rn50 never changes"), std::string::npos) << message;
}

TEST_F(Mig, RefusesWhenMigWaitsForAGpuReset) {
  const std::string message = refusal(nvml, 3, "0");
  EXPECT_NE(message.find("waits for a GPU reset"), std::string::npos) << message;
  EXPECT_NE(message.find("nvidia-smi -i 3 -r"), std::string::npos) << message;
}

TEST_F(Mig, RefusesAGpuWithoutMigSupport) {
  EXPECT_NE(refusal(nvml, 2, "0").find("GPU 2 (NVIDIA GeForce RTX 3090) does not support MIG"), std::string::npos);
}

TEST_F(Mig, RefusesWhenNoInstancesExist) {
  const std::string message = refusal(nvml, 4, "0");
  EXPECT_NE(message.find("no MIG instances"), std::string::npos) << message;
  EXPECT_NE(message.find("-cgi"), std::string::npos) << message;
}

TEST_F(Mig, RefusesAnUnknownUuidListingTheKnownOnes) {
  const std::string message = refusal(nvml, 0, "MIG-dddddddd-0000-0000-0000-000000000004");
  EXPECT_NE(message.find("MIG-dddddddd-0000-0000-0000-000000000004"), std::string::npos) << message;
  EXPECT_NE(message.find("MIG-aaaaaaaa-0000-0000-0000-000000000001 (index 0)"), std::string::npos) << message;
  EXPECT_NE(message.find("MIG-cccccccc-0000-0000-0000-000000000003 (index 2)"), std::string::npos) << message;
}

TEST_F(Mig, RefusesAnIndexOutOfRange) {
  const std::string message = refusal(nvml, 0, "3");
  EXPECT_NE(message.find("index 3 is out of range"), std::string::npos) << message;
  EXPECT_NE(message.find("0 to 2"), std::string::npos) << message;
  refusal(nvml, 0, "99999999999999999999");  // too long for any index, no overflow
}

TEST_F(Mig, RefusesSpecsThatAreNeitherUuidNorIndex) {
  for (const std::string spec : {"", "-1", "1.5", "first", "GPU-00000000-0000-0000-0000-000000000000", " 1"})
    EXPECT_NE(refusal(nvml, 0, spec).find("neither a MIG instance UUID"), std::string::npos) << spec;
}

TEST_F(Mig, RefusesAGpuNvmlDoesNotHave) {
  EXPECT_NE(refusal(nvml, 5, "0").find("GPU 5 does not exist (NVML sees 5 GPUs)"), std::string::npos);
  EXPECT_NE(refusal(nvml, -1, "0").find("GPU -1 does not exist"), std::string::npos);
}

TEST_F(Mig, RefusesMoreThanOneProcess) {
  EXPECT_NO_THROW(check_mig_compatible(1));
  try {
    check_mig_compatible(2);
    ADD_FAILURE() << "two processes on MIG were accepted";
  } catch (const ConfigError& e) {
    const std::string message = e.what();
    EXPECT_EQ(message.rfind("config key 'mig': ", 0), 0u) << message;
    EXPECT_NE(message.find("NVLink"), std::string::npos) << message;
    EXPECT_NE(message.find("peer-to-peer"), std::string::npos) << message;
  }
}

TEST_F(Mig, ApplyingTheChoiceSetsCudaVisibleDevices) {
  const char* saved = std::getenv("CUDA_VISIBLE_DEVICES");
  const std::string previous = saved ? saved : "";
  apply_mig_choice("MIG-aaaaaaaa-0000-0000-0000-000000000001");
  EXPECT_STREQ(std::getenv("CUDA_VISIBLE_DEVICES"), "MIG-aaaaaaaa-0000-0000-0000-000000000001");
  if (saved)
    setenv("CUDA_VISIBLE_DEVICES", previous.c_str(), 1);
  else
    unsetenv("CUDA_VISIBLE_DEVICES");
}

}  // namespace
}  // namespace rn50::monitor
