// tests/trainer/test_options.cpp: the parts' options from the configuration: the input's decode budget from
// decode_memory_mb, or from the memory shared by the processes of a launch on this host; the decode threads' share
// modes; batched_casts for one process only; wgrad_stream's auto.
#include "trainer/options.h"

#include <gtest/gtest.h>

#include "core/config.h"
#include "core/launch_env.h"
#include "data/decode_budget.h"
#include "models/model.h"

namespace rn50::trainer {
namespace {

TEST(Options, TheDecodeBudgetIsDecodeMemoryMbPerProcess) {
  Config config;
  config.decode_memory_mb = 3;
  LaunchEnv launch;
  launch.world_size = 8;
  launch.local_world_size = 4;
  const input::InputOptions o = input_options(config, launch);
  EXPECT_EQ(o.decode_budget_bytes, uint64_t{3} << 20);
  EXPECT_EQ(o.decode_budget_origin, "decode_memory_mb");
}

// Automatic: a quarter of this process's memory, divided by the launch's processes on this host, and said so.
TEST(Options, TheAutomaticDecodeBudgetIsEachLocalProcesssShare) {
  const Config config;
  const data::ProcessMemory memory = data::process_memory();
  const input::InputOptions alone = input_options(config, LaunchEnv{});
  EXPECT_EQ(alone.decode_budget_bytes, data::decode_budget_bytes(0, memory.bytes, 1));
  EXPECT_EQ(alone.decode_budget_origin.rfind("a quarter of ", 0), 0u) << alone.decode_budget_origin;
  EXPECT_EQ(alone.decode_budget_origin.find("processes"), std::string::npos) << alone.decode_budget_origin;
  LaunchEnv launch;
  launch.world_size = 8;
  launch.local_world_size = 4;
  const input::InputOptions ranked = input_options(config, launch);
  EXPECT_EQ(ranked.decode_budget_bytes, alone.decode_budget_bytes / 4);
  EXPECT_NE(ranked.decode_budget_origin.find(", shared by 4 processes on this host"), std::string::npos)
      << ranked.decode_budget_origin;
}

// decode_cpu_share: 0 is off (the threads only read files), a fraction is the fixed share, auto the automatic one.
TEST(Options, TheCpuDecodeShareMapsToTheLoadersModes) {
  Config config;
  using Mode = data::CpuDecodeShare::Mode;
  EXPECT_EQ(input_options(config, LaunchEnv{}).decode_cpu_share.mode, Mode::kOff);
  config.decode_cpu_share = DecodeCpuShare{false, 0.25};
  const input::InputOptions fixed = input_options(config, LaunchEnv{});
  EXPECT_EQ(fixed.decode_cpu_share.mode, Mode::kFixed);
  EXPECT_EQ(fixed.decode_cpu_share.fraction, 0.25);
  config.decode_cpu_share = DecodeCpuShare{true, 0};
  EXPECT_EQ(input_options(config, LaunchEnv{}).decode_cpu_share.mode, Mode::kAuto);
}

// batched_casts holds every weight gradient until the backward's end: one process only.
TEST(Options, BatchedCastsAreForOneProcessOnly) {
  Config config;
  EXPECT_FALSE(model_options(config, 10).batched_casts);
  config.batched_casts = true;
  EXPECT_TRUE(model_options(config, 10).batched_casts);
  EXPECT_TRUE(model_options(config, 10, 1).batched_casts);
  EXPECT_FALSE(model_options(config, 10, 2).batched_casts);
}

// wgrad_stream: auto runs the weight gradients beside the data gradients unless nvJPEG decodes beside the step (a
// folder with decode: gpu); on and off are kept whatever the data.
TEST(Options, WgradStreamAutoIsOffOnlyBesideGpuDecoding) {
  Config config;
  EXPECT_EQ(config.wgrad_stream, WgradStream::kAuto);
  struct Case {
    DataSource data;
    Decode decode;
    WgradStream setting;
    bool beside;
  };
  const Case cases[] = {
      {DataSource::kFolder, Decode::kCpu, WgradStream::kAuto, true},
      {DataSource::kFolder, Decode::kGpu, WgradStream::kAuto, false},
      {DataSource::kSynthetic, Decode::kGpu, WgradStream::kAuto, true},  // synthetic data decodes nothing
      {DataSource::kSynthetic, Decode::kCpu, WgradStream::kAuto, true},
      {DataSource::kFolder, Decode::kGpu, WgradStream::kOn, true},
      {DataSource::kFolder, Decode::kCpu, WgradStream::kOff, false},
      {DataSource::kSynthetic, Decode::kCpu, WgradStream::kOff, false},
  };
  for (const Case& c : cases) {
    config.data = c.data;
    config.decode = c.decode;
    config.wgrad_stream = c.setting;
    SCOPED_TRACE(name_of(c.data) + " " + name_of(c.decode) + " " + name_of(c.setting));
    EXPECT_EQ(weight_gradients_beside(config), c.beside);
    EXPECT_EQ(model_options(config, 10).wgrad_stream, c.beside);
  }
}

}  // namespace
}  // namespace rn50::trainer
