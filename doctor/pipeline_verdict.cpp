// doctor/pipeline_verdict.cpp: the data-pipeline verdict's rule and wording.
#include "doctor/pipeline_verdict.h"

#include <algorithm>
#include <cmath>

#include "core/log.h"

namespace rn50::doctor {

double gpu_decode_in_training(double model_rate, int batch, double step_alone_ms, double batch_ms) {
  if (model_rate <= 0 || batch < 1) return 0;
  const double step_ms = 1e3 * batch / model_rate;
  return 1e3 * batch / (step_ms + std::max(0.0, batch_ms - step_alone_ms));
}

double gpu_decode_with_cpu_share(double model_rate, double gpu_in_training, double threads_rate) {
  if (model_rate <= 0 || gpu_in_training <= 0) return 0;
  const double gpu_share = std::max(0.0, 1 - threads_rate / model_rate);
  return model_rate / (1 + (model_rate / gpu_in_training - 1) * gpu_share);
}

ReportRow data_pipeline_verdict(const PipelineRates& rates) {
  ReportRow row{"verdict", "data pipeline",
                "CPU feeds " + format_rate(rates.cpu_all_cores) + " img/s, the model consumes " +
                    format_rate(rates.model) + " img/s",
                "", ""};
  const std::optional<double> beside = rates.gpu_decode_beside_step;
  const std::string gpu = beside ? strprintf(
                                       "training with GPU decoding would get about %.0f img/s (measured beside "
                                       "a step; %.0f alone)",
                                       *beside, rates.gpu_decode.value_or(0))
                          : rates.gpu_decode ? strprintf("GPU decoding alone measured %.0f img/s", *rates.gpu_decode)
                                             : "";
  const double in_training = rates.cpu_all_cores * kLoaderShareOfDecodeRate;
  if (in_training >= rates.model) {
    row.verdict = "ok";
    row.note = "the CPU can keep up" + (gpu.empty() ? "" : "; " + gpu);
    return row;
  }
  const std::string threads =
      rates.cpu_per_core > 0
          ? strprintf("about %d decode threads would keep up (this process may use %d)",
                      static_cast<int>(std::ceil(rates.model / (rates.cpu_per_core * kLoaderShareOfDecodeRate))),
                      rates.cores)
          : "one core decoded nothing";
  // The CPU decodes as fast as the model trains, but a training run's loader gets less of it than the benchmark.
  const bool tight = rates.cpu_all_cores >= rates.model;
  row.verdict = tight ? "warn" : "bad";
  const std::string head =
      tight ? strprintf("tight: a training run's loader gets about %.0f img/s of it, less than the model consumes; ",
                        in_training)
            : "data-bound: ";
  // The decode threads beside the GPU decoder (decode_cpu_share: auto): all cores but two, which are left to the
  // training and decode threads.
  const double threads_beside = in_training * std::max(0, rates.cores - 2) / std::max(1, rates.cores);
  if (beside) {
    // Measured beside the step, each path's rate is what training would get, and within the goal's 3% of the model's
    // is enough: the CPU's loader, GPU decoding, or both (the decode threads taking their share of the images;
    // gpu_decode_with_cpu_share). The fastest is named.
    const double enough = rates.model * kKeepsUpShareOfModel;
    const double cpu_path = std::min(rates.model, in_training);
    const double both = gpu_decode_with_cpu_share(rates.model, *beside, threads_beside);
    const std::string share =
        strprintf("with the decode threads taking about %.0f%% of the images beside it, about %.0f img/s",
                  100 * std::min(1.0, threads_beside / rates.model), both);
    if (*beside >= enough && *beside >= cpu_path)
      row.note = head + threads + "; " + gpu +
                 ", within 3% of the model's rate: try --decode gpu (--decode-cpu-share auto lets the decode threads "
                 "decode what they can beside it)";
    else if (both >= enough && both >= cpu_path)
      row.note = head + threads + "; " + gpu + ", short of the model's rate alone; " + share +
                 ": try --decode gpu --decode-cpu-share auto";
    else if (cpu_path >= std::max(*beside, both))
      row.note = head + threads + "; " + gpu + "; " + share + ": GPU decoding would not feed more than the CPU";
    else
      row.note = head + threads + "; " + gpu + ", short of the model's rate; " + share +
                 ": data-bound either way (--decode gpu" + (both > *beside ? " --decode-cpu-share auto" : "") +
                 " comes closest)";
  } else if (rates.gpu_decode) {
    // A report without the rate beside the step. Above the model's rate, not equal to it: the decode shares the GPU
    // with the training step. Where it is not, the decode threads beside it may make up the difference, the two rates
    // taken to add: an upper bound (on the H200's 8 cores the share gave less than the sum, docs/doctor.md).
    if (*rates.gpu_decode > rates.model)
      row.note = head + threads + "; " + gpu +
                 ", more than the model consumes: try --decode gpu (--decode-cpu-share auto lets the decode threads "
                 "decode what they can beside it)";
    else if (*rates.gpu_decode + threads_beside > rates.model)
      row.note = head + threads + "; " + gpu +
                 strprintf(
                     ", no more than the model consumes alone, but with the decode threads' %.0f img/s beside "
                     "it: try --decode gpu --decode-cpu-share auto",
                     threads_beside);
    else
      row.note = head + threads + "; " + gpu +
                 ", no more than the model consumes, nor with the decode threads: data-bound either way";
  } else if (!rates.gpu_decode_unavailable.empty()) {
    row.note = head + threads + "; GPU decoding is not available here (" + rates.gpu_decode_unavailable + ")";
  } else {
    row.note = head + threads + ", or GPU decoding (--decode gpu)";
  }
  return row;
}

}  // namespace rn50::doctor
