// tests/trainer/test_pipeline_verdict.cpp: the doctor's data-pipeline verdict for each case of CPU and GPU decoding.
#include <gtest/gtest.h>

#include "trainer/pipeline_verdict.h"

namespace rn50::trainer {
namespace {

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

TEST(PipelineVerdict, TheCpuKeepsUp) {
  const ReportRow row = data_pipeline_verdict({9500, 670, 16, 6100, std::nullopt});
  EXPECT_EQ(row.verdict, "ok");
  EXPECT_EQ(row.value, "CPU feeds 9500 img/s, the model consumes 6100");
  EXPECT_EQ(row.note, "the CPU can keep up");
  const ReportRow with_gpu = data_pipeline_verdict({9500, 670, 16, 6100, 21689.0});
  EXPECT_EQ(with_gpu.verdict, "ok");
  EXPECT_EQ(with_gpu.note, "the CPU can keep up; GPU decoding alone measured 21689 img/s");
}

TEST(PipelineVerdict, DataBoundWithoutAGpuMeasurementCountsTheThreadsNeeded) {
  const ReportRow row = data_pipeline_verdict({2600, 670, 4, 6100, std::nullopt});
  EXPECT_EQ(row.verdict, "bad");
  // 6100 / 670 = 9.1: ten threads
  EXPECT_EQ(row.note, "data-bound: needs about 10 decode threads (this process may use 4), or GPU decoding "
                      "(--decode gpu)");
}

TEST(PipelineVerdict, DataBoundButGpuDecodingWouldFeedTheModel) {
  const ReportRow row = data_pipeline_verdict({2600, 670, 4, 6100, 14116.0});
  EXPECT_EQ(row.verdict, "bad");
  EXPECT_TRUE(has(row.note, "needs about 10 decode threads")) << row.note;
  EXPECT_TRUE(has(row.note, "GPU decoding alone measured 14116 img/s, enough for the model: try --decode gpu"))
      << row.note;
}

TEST(PipelineVerdict, DataBoundEitherWayWhenGpuDecodingIsSlowerThanTheModel) {
  const ReportRow row = data_pipeline_verdict({2600, 670, 4, 6100, 5000.0});
  EXPECT_EQ(row.verdict, "bad");
  EXPECT_TRUE(has(row.note, "GPU decoding alone measured 5000 img/s, not enough for the model: data-bound either way"))
      << row.note;
}

TEST(PipelineVerdict, ExactlyTheModelsRateKeepsUp) {
  EXPECT_EQ(data_pipeline_verdict({6100, 610, 10, 6100, std::nullopt}).verdict, "ok");
  EXPECT_TRUE(has(data_pipeline_verdict({6000, 600, 10, 6100, 6100.0}).note, "enough for the model: try"));
}

}  // namespace
}  // namespace rn50::trainer
