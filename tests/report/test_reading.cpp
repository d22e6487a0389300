// tests/report/test_reading.cpp: the utilisation reading against the cases in tests/fixtures/utilisation_readings.json
// (bench/ablation.py is held to the same cases), and the sentence across configurations.
#include "report/reading.h"

#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

namespace rn50::report {
namespace {

std::optional<double> number(const nlohmann::json& j, const char* key) {
  if (!j.contains(key) || j[key].is_null()) return std::nullopt;
  return j[key].get<double>();
}

TEST(Reading, EveryFixtureCaseGivesItsSentence) {
  std::ifstream in(std::string(RN50_FIXTURES) + "/utilisation_readings.json");
  ASSERT_TRUE(in) << "fixture missing";
  const nlohmann::json fixture = nlohmann::json::parse(in);
  ASSERT_GE(fixture["cases"].size(), 10u);
  for (const auto& c : fixture["cases"]) {
    Utilisation u;
    u.gpu_util_pct = number(c["util"], "gpu_util_pct");
    u.sm_util_pct = number(c["util"], "sm_util_pct");
    u.tensor_util_pct = number(c["util"], "tensor_util_pct");
    u.dram_bw_util_pct = number(c["util"], "dram_bw_util_pct");
    SwitchFacts f;
    const auto& facts = c["facts"];
    f.precision = facts.value("precision", "");
    f.tf32 = facts.value("tf32", "");
    f.fusion = facts.value("fusion", "");
    if (facts.contains("cuda_graph")) f.cuda_graph = facts["cuda_graph"].get<bool>();
    if (facts.contains("channels_last")) f.channels_last = facts["channels_last"].get<bool>();
    EXPECT_EQ(read_utilisation(c["cuda"].get<bool>(), u, number(c, "data_wait_share"), f),
              c["expected"].get<std::string>())
        << c["name"];
  }
}

TEST(Reading, AcrossRowsSaysWhenNvmlDoesNotTellThemApart) {
  Utilisation fp32, fp16;
  fp32.gpu_util_pct = 99.5, fp32.tensor_util_pct = 0.4;
  fp16.gpu_util_pct = 99.0, fp16.tensor_util_pct = 15.6;
  const std::string across = read_across({{"the baseline", 904, fp32}, {"the optimized run", 6150, fp16}});
  EXPECT_EQ(across,
            "NVML's GPU utilisation (what nvidia-smi shows) reads 99.5% for the baseline and 99.0% for the optimized "
            "run, which trains 6.80x faster; their tensor cores read 0.4% and 15.6%. NVML counts the time in which "
            "any kernel ran, not how much of the GPU it used: read the SM and tensor-core columns.");
  // NVML's figure rising with the speed does not mislead; nor do rows without the tensor metric.
  Utilisation idle = fp32;
  idle.gpu_util_pct = 60;
  EXPECT_EQ(read_across({{"slow", 904, idle}, {"fast", 6150, fp16}}), "");
  Utilisation no_gpm = fp16;
  no_gpm.tensor_util_pct.reset();
  EXPECT_EQ(read_across({{"slow", 904, fp32}, {"fast", 6150, no_gpm}}), "");
  EXPECT_EQ(read_across({{"a", 904, fp32}, {"b", 1000, fp16}}), "");  // under 1.5x apart
}

TEST(Reading, FiguresSayUnavailableRatherThanZero) {
  const auto& columns = utilisation_columns();
  ASSERT_EQ(columns.size(), 8u);
  EXPECT_EQ(format_figure(columns[0], 99.53), "99.5%");
  EXPECT_EQ(format_figure(columns[0], std::nullopt), "unavailable");
  EXPECT_EQ(format_figure(columns[6], 584.8), "585 W");
  EXPECT_EQ(format_figure(columns[7], 1980.0), "1980 MHz");
}

}  // namespace
}  // namespace rn50::report
