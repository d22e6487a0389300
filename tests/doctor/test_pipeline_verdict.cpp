// tests/doctor/test_pipeline_verdict.cpp: the doctor's data-pipeline verdict for each case of CPU and GPU decoding.
#include <gtest/gtest.h>

#include "core/log.h"
#include "doctor/pipeline_verdict.h"

namespace rn50::doctor {
namespace {

PipelineRates rates(double cpu_all_cores, double cpu_per_core, std::optional<double> gpu_decode = std::nullopt,
                    std::string unavailable = "") {
  return {cpu_all_cores, cpu_per_core, 4, 6100, gpu_decode, std::move(unavailable), std::nullopt};
}

TEST(PipelineVerdict, TheCpuKeepsUp) {
  const ReportRow row = data_pipeline_verdict(rates(9500, 670));
  EXPECT_EQ(row.verdict, "ok");
  EXPECT_EQ(row.value, "CPU feeds 9500 img/s, the model consumes 6100 img/s");
  EXPECT_EQ(row.note, "the CPU can keep up");
  EXPECT_EQ(data_pipeline_verdict(rates(9500, 670, 21689.0)).note,
            "the CPU can keep up; GPU decoding alone measured 21689 img/s");
  // The loader's share of the decode rate exactly the model's: 6100 / 0.9 = 6778.
  EXPECT_EQ(data_pipeline_verdict(rates(6100 / kLoaderShareOfDecodeRate, 670)).verdict, "ok");
}

// The benchmark's rate reaches the model's, the loader's share of it does not: a warning, not "ok".
TEST(PipelineVerdict, ADecodeRateJustAboveTheModelsIsTight) {
  for (const double cpu : {6100.0, 6700.0}) {
    const ReportRow row = data_pipeline_verdict(rates(cpu, 670, 21689.0));
    EXPECT_EQ(row.verdict, "warn") << cpu;
    EXPECT_EQ(row.note.rfind("tight: a training run's loader gets about ", 0), 0U) << row.note;
    // 6100 / (670 * 0.9) = 10.1: eleven threads
    EXPECT_NE(
        row.note.find("about 11 decode threads would keep up (this process may use 4); GPU decoding alone "
                      "measured 21689 img/s, more than the model consumes: try --decode gpu (--decode-cpu-share auto "
                      "lets the decode threads decode what they can beside it)"),
        std::string::npos)
        << row.note;
  }
  EXPECT_NE(data_pipeline_verdict(rates(6700, 670)).note.find("about 6030 img/s of it"), std::string::npos);
}

TEST(PipelineVerdict, DataBoundCountsTheThreadsNeededAndOffersGpuDecoding) {
  const ReportRow row = data_pipeline_verdict(rates(2600, 670));
  EXPECT_EQ(row.verdict, "bad");
  // 6100 / (670 * 0.9) = 10.1: eleven threads
  EXPECT_EQ(row.note,
            "data-bound: about 11 decode threads would keep up (this process may use 4), or GPU decoding "
            "(--decode gpu)");
}

TEST(PipelineVerdict, DataBoundButGpuDecodingWouldFeedTheModel) {
  EXPECT_EQ(data_pipeline_verdict(rates(2600, 670, 14116.0)).note,
            "data-bound: about 11 decode threads would keep up (this process may use 4); GPU decoding alone "
            "measured 14116 img/s, more than the model consumes: try --decode gpu (--decode-cpu-share auto lets "
            "the decode threads decode what they can beside it)");
}

TEST(PipelineVerdict, DataBoundEitherWayWhenGpuDecodingIsNoFaster) {
  // The decode threads beside it, on 2 of the 4 cores: 2600 * 0.9 * 2 / 4 = 1170 img/s; 4900 + 1170 is not above 6100.
  for (double gpu : {3000.0, 4900.0}) {
    const ReportRow row = data_pipeline_verdict(rates(2600, 670, gpu));
    EXPECT_EQ(row.verdict, "bad");
    EXPECT_NE(row.note.find("no more than the model consumes, nor with the decode threads: data-bound either way"),
              std::string::npos)
        << row.note;
    EXPECT_EQ(row.note.find("or GPU decoding"), std::string::npos) << row.note;
  }
}

// GPU decoding alone no faster than the model, but with the decode threads' share beside it: both decoders.
TEST(PipelineVerdict, BothDecodersWhereNeitherAloneKeepsUp) {
  for (double gpu : {5000.0, 6100.0}) {  // equal is not enough alone: decoding shares the GPU with the step
    const ReportRow row = data_pipeline_verdict(rates(2600, 670, gpu));
    EXPECT_EQ(row.verdict, "bad");
    EXPECT_NE(row.note.find("no more than the model consumes alone, but with the decode threads' 1170 img/s beside "
                            "it: try --decode gpu --decode-cpu-share auto"),
              std::string::npos)
        << row.note;
  }
}

TEST(PipelineVerdict, NoGpuDecodingSuggestedWhereItCannotRun) {
  const ReportRow row = data_pipeline_verdict(rates(2600, 670, std::nullopt, "no CUDA device"));
  EXPECT_EQ(row.note,
            "data-bound: about 11 decode threads would keep up (this process may use 4); GPU decoding is not "
            "available here (no CUDA device)");
}

TEST(PipelineVerdict, AZeroPerCoreRateGivesNoThreadCount) {
  const ReportRow row = data_pipeline_verdict(rates(0, 0));
  EXPECT_EQ(row.verdict, "bad");
  EXPECT_EQ(row.note, "data-bound: one core decoded nothing, or GPU decoding (--decode gpu)");
}

// Beside the step: the step's time plus what the decode added to the step beside it, never faster than the model.
TEST(PipelineVerdict, TrainingWithGpuDecodingGetsTheStepPlusWhatTheDecodeAdds) {
  // 8,960 img/s at 256 a batch: a 28.57 ms step.
  EXPECT_DOUBLE_EQ(gpu_decode_in_training(8960, 256, 28.0, 27.5), 8960);  // hidden inside the step
  EXPECT_DOUBLE_EQ(gpu_decode_in_training(8960, 256, 28.0, 28.0), 8960);
  // 2 ms added: 256 / 30.571 ms = 8,374 img/s (the H200's 8-core training got about 8,400).
  EXPECT_NEAR(gpu_decode_in_training(8960, 256, 28.0, 30.0), 256e3 / (256e3 / 8960 + 2.0), 1e-9);
  EXPECT_NEAR(gpu_decode_in_training(8960, 256, 28.0, 30.0), 8373.8, 0.1);
  EXPECT_EQ(gpu_decode_in_training(0, 256, 28.0, 30.0), 0);
}

PipelineRates beside(double cpu_all_cores, double cpu_per_core, double in_training) {
  PipelineRates r = rates(cpu_all_cores, cpu_per_core, 21876.0);
  r.gpu_decode_beside_step = in_training;
  return r;
}

// Measured beside the step, GPU decoding keeps up within 3% of the model's rate (6100: 5917 and up); its rate alone,
// far above the model's, no longer decides.
TEST(PipelineVerdict, BesideTheStepWithinThreePercentKeepsUp) {
  for (const double in_training : {5917.0, 6100.0}) {
    const ReportRow row = data_pipeline_verdict(beside(2600, 670, in_training));
    EXPECT_EQ(row.verdict, "bad");
    EXPECT_NE(row.note.find(strprintf("training with GPU decoding would get about %.0f img/s (measured beside a step; "
                                      "21876 alone), within 3%% of the model's rate: try --decode gpu",
                                      in_training)),
              std::string::npos)
        << row.note;
  }
}

// The decode threads' share of the images shrinks the time GPU decoding adds to the step by that share.
TEST(PipelineVerdict, TheDecodeThreadsShareShrinksWhatGpuDecodingAdds) {
  // The H200's 8 cores (2026-12-05): threads 3,198 of 8,980 (35.6%), GPU decoding alone in training 8,296: 8,980 /
  // (1 + (8980 / 8296 - 1) * (1 - 3198 / 8980)) = 8,527 (the run measured 8,445).
  EXPECT_NEAR(gpu_decode_with_cpu_share(8980, 8296, 3198), 8527.2, 0.5);
  EXPECT_DOUBLE_EQ(gpu_decode_with_cpu_share(8980, 8980, 3198), 8980);  // nothing added, nothing to shrink
  EXPECT_DOUBLE_EQ(gpu_decode_with_cpu_share(8980, 5000, 9000), 8980);  // the threads alone keep up
  EXPECT_DOUBLE_EQ(gpu_decode_with_cpu_share(8980, 5000, 0), 5000);
  EXPECT_EQ(gpu_decode_with_cpu_share(8980, 0, 3198), 0);
}

// The H200's 8-core case: the doctor's all-core rate 4,738 (threads beside the GPU decoder 4,738 * 0.9 * 6 / 8 =
// 3,198), the model 8,980 (enough: 8,711). GPU decoding 8,296 in training: with the share 8,527, short: data-bound,
// the share closest (the run: 8,445, 6.0% below). At 8,600: with the share 8,732, enough.
TEST(PipelineVerdict, BesideTheStepShortOfTheModelNamesBothDecodersOrTheClosest) {
  PipelineRates r{4738, 600, 8, 8980, 21876.0, "", 8296.0};
  const ReportRow bound = data_pipeline_verdict(r);
  EXPECT_EQ(bound.verdict, "bad");
  EXPECT_NE(bound.note.find("training with GPU decoding would get about 8296 img/s (measured beside a step; 21876 "
                            "alone), short of the model's rate; with the decode threads taking about 36% of the "
                            "images beside it, about 8527 img/s: data-bound either way (--decode gpu "
                            "--decode-cpu-share auto comes closest)"),
            std::string::npos)
      << bound.note;
  r.gpu_decode_beside_step = 8600.0;
  const ReportRow both = data_pipeline_verdict(r);
  EXPECT_NE(both.note.find("about 8600 img/s (measured beside a step; 21876 alone), short of the model's rate alone; "
                           "with the decode threads taking about 36% of the images beside it, about 8732 img/s: try "
                           "--decode gpu --decode-cpu-share auto"),
            std::string::npos)
      << both.note;
}

// Tight: the CPU's loader (6700 * 0.9 = 6030 of the model's 6100) beats GPU decoding beside the step (5000; with the
// threads' 3015 beside it 5489): GPU decoding is not suggested.
TEST(PipelineVerdict, BesideTheStepSlowerThanTheCpuIsNotSuggested) {
  const ReportRow row = data_pipeline_verdict(beside(6700, 670, 5000));
  EXPECT_EQ(row.verdict, "warn");
  EXPECT_NE(row.note.find("about 5489 img/s: GPU decoding would not feed more than the CPU"), std::string::npos)
      << row.note;
  EXPECT_EQ(row.note.find("try --decode gpu"), std::string::npos) << row.note;
}

// A CPU trains ResNet-50 at a few images a second: "consumes 0" would hide it.
TEST(PipelineVerdict, SmallRatesKeepTwoFigures) {
  PipelineRates cpu = rates(486, 485);
  cpu.model = 0.43;
  EXPECT_EQ(data_pipeline_verdict(cpu).value, "CPU feeds 486 img/s, the model consumes 0.43 img/s");
  EXPECT_EQ(format_rate(5.26), "5.3");
  EXPECT_EQ(format_rate(9.96), "10");
  EXPECT_EQ(format_rate(6100.4), "6100");
}

}  // namespace
}  // namespace rn50::doctor
