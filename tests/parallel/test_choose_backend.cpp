// tests/parallel/test_choose_backend.cpp: which backend data parallel takes for where its ranks run, and the errors.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/errors.h"
#include "parallel/distributed.h"

namespace rn50::parallel {
namespace {

using Backend = DistributedOptions::Backend;

std::string choose(Backend asked, const std::vector<RankDevice>& devices, std::string* why = nullptr) {
  std::string reason;
  const std::string backend = choose_backend(asked, devices, &reason);
  EXPECT_FALSE(reason.empty());
  if (why) *why = reason;
  return backend;
}

std::string error_of(Backend asked, const std::vector<RankDevice>& devices) {
  std::string reason;
  try {
    choose_backend(asked, devices, &reason);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

const RankDevice kCpuA{"a", ""}, kCpuB{"b", ""}, kGpu0{"a", "uuid0"}, kGpu1{"a", "uuid1"}, kOtherHostGpu0{"b", "uuid0"};

TEST(ChooseBackend, GlooOnTheCpuUnlessSharedMemoryIsAsked) {
  EXPECT_EQ(choose(Backend::kAuto, {kCpuA, kCpuA}), "gloo");
  EXPECT_EQ(choose(Backend::kGloo, {kCpuA, kCpuB}), "gloo");
  EXPECT_EQ(choose(Backend::kShm, {kCpuA, kCpuA}), "shm");
  EXPECT_NE(error_of(Backend::kNccl, {kCpuA, kCpuA}).find("nccl needs GPUs"), std::string::npos);
  EXPECT_NE(error_of(Backend::kShm, {kCpuA, kCpuB}).find("one host"), std::string::npos);
}

TEST(ChooseBackend, NcclWithAGpuPerRankSharedMemoryOnASharedGpu) {
  EXPECT_EQ(choose(Backend::kAuto, {kGpu0, kGpu1}), "nccl");
  // The same UUID on two hosts is two GPUs (a UUID names a GPU, but hosts are compared first).
  EXPECT_EQ(choose(Backend::kAuto, {kGpu0, kOtherHostGpu0}), "nccl");
  std::string why;
  EXPECT_EQ(choose(Backend::kAuto, {kGpu0, kGpu1, kGpu0}, &why), "shm");
  EXPECT_NE(why.find("ranks 0 and 2 share a GPU"), std::string::npos) << why;
  EXPECT_EQ(choose(Backend::kShm, {kGpu0, kGpu1}), "shm");
  EXPECT_EQ(choose(Backend::kGloo, {kGpu0, kGpu0}), "gloo");
}

TEST(ChooseBackend, RefusesWhatCannotWork) {
  EXPECT_NE(error_of(Backend::kNccl, {kGpu0, kGpu0}).find("NCCL needs a GPU per rank"), std::string::npos);
  // A shared GPU in a run across hosts: NCCL refuses it and shared memory cannot reach the other host.
  EXPECT_NE(error_of(Backend::kAuto, {kGpu0, kGpu0, kOtherHostGpu0}).find("every rank on one host"), std::string::npos);
  EXPECT_NE(error_of(Backend::kAuto, {kCpuA, kGpu0}).find("same device kind"), std::string::npos);
}

}  // namespace
}  // namespace rn50::parallel
