// trainer/pipeline_verdict.cpp: the data-pipeline verdict's rule and wording.
#include "trainer/pipeline_verdict.h"

#include <algorithm>
#include <cmath>

#include "core/log.h"

namespace rn50::trainer {

ReportRow data_pipeline_verdict(const PipelineRates& rates) {
  ReportRow row{"verdict", "data pipeline",
                strprintf("CPU feeds %.0f img/s, the model consumes %.0f", rates.cpu_all_cores, rates.model), "", ""};
  const std::string gpu = rates.gpu_decode ? strprintf("GPU decoding alone measured %.0f img/s", *rates.gpu_decode) : "";
  if (rates.cpu_all_cores >= rates.model) {
    row.verdict = "ok";
    row.note = "the CPU can keep up" + (gpu.empty() ? "" : "; " + gpu);
    return row;
  }
  row.verdict = "bad";
  const int needed = static_cast<int>(std::ceil(rates.model / std::max(1.0, rates.cpu_per_core)));
  row.note = strprintf("data-bound: needs about %d decode threads (this process may use %d), or GPU decoding "
                       "(--decode gpu)", needed, rates.cores);
  if (rates.gpu_decode) {
    row.note += *rates.gpu_decode >= rates.model ? "; " + gpu + ", enough for the model: try --decode gpu"
                                                 : "; " + gpu + ", not enough for the model: data-bound either way";
  }
  return row;
}

}  // namespace rn50::trainer
