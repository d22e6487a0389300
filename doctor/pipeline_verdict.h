// doctor/pipeline_verdict.h: the doctor's data-pipeline verdict: can the CPU, or GPU decoding, feed the model at
// the rate it trains (torch-free).
#pragma once

#include <optional>
#include <string>

#include "doctor/rows.h"

namespace rn50::doctor {

struct PipelineRates {                 // images/s, as the doctor measured them
  double cpu_all_cores = 0;            // JPEG decode + augmentation on every usable core
  double cpu_per_core = 0;             // ... on one
  int cores = 1;                       // the cores this process may use
  double model = 0;                    // the model's training on synthetic data (rn50 doctor --model): what it consumes
  std::optional<double> gpu_decode;    // decode: gpu's stage alone, where this build and device could measure it
  std::string gpu_decode_unavailable;  // why decode: gpu cannot run here, when it cannot (empty: it can, or unknown)
};

// ok when the CPU keeps up; bad when it does not, saying how many decode threads it would take and whether GPU
// decoding, as measured, would (more than the model's rate: it shares the GPU with the step).
ReportRow data_pipeline_verdict(const PipelineRates& rates);

}  // namespace rn50::doctor
