// report/reading.h: what a configuration's utilisation says, in a sentence for the user: NVML's "GPU utilisation"
// (what nvidia-smi shows) read next to SM, tensor-pipe and DRAM activity and the input wait (torch-free). The same
// rules are in bench/ablation.py; tests/fixtures/utilisation_readings.json holds the cases both must agree on.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace rn50::report {

// One configuration's figures, each the median over its measured epochs of the epoch means; nullopt: unavailable.
struct Utilisation {
  std::optional<double> gpu_util_pct, mem_bw_util_pct, sm_util_pct, sm_occupancy_pct, tensor_util_pct, dram_bw_util_pct,
      power_w, sm_clock_mhz;
};

// What the configuration is known to have switched (empty / nullopt: not known), for the advice.
struct SwitchFacts {
  std::string precision;  // fp32 | bf16 | fp16
  std::string tf32;       // default | on | off
  std::string fusion;     // off | bn
  std::optional<bool> cuda_graph, channels_last;
};

// The sentence. `cuda`: a GPU run; `data_wait_share`: the host's wait for input over the wall time.
std::string read_utilisation(bool cuda, const Utilisation& u, std::optional<double> data_wait_share,
                             const SwitchFacts& facts);

// Across configurations: where NVML's figure ranks them against their speed. Empty when it does not mislead.
struct NamedFigures {
  std::string name;
  double images_per_s = 0;  // per GPU where `per_gpu`: NVML's figure is one GPU's
  Utilisation u;
};
std::string read_across(const std::vector<NamedFigures>& rows, bool per_gpu = false);

// The record keys behind each figure (the epoch summary's "<metric>_mean"), in column order, with headings.
struct UtilisationColumn {
  const char* heading;
  const char* metric;  // the sampler's name; the epoch records' key is metric + "_mean"
  const char* unit;    // "%", " W", " MHz"
  std::optional<double> Utilisation::*member;
};
const std::vector<UtilisationColumn>& utilisation_columns();

// "99.5%", "585 W", "1980 MHz", or "unavailable".
std::string format_figure(const UtilisationColumn& column, const std::optional<double>& value);

}  // namespace rn50::report
