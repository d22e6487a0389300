// report/summary.h: one configuration's figures from its epoch records (the medians the reports print), and what its
// configuration switched, in words (torch-free).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "report/reading.h"
#include "report/records.h"

namespace rn50::report {

struct EpochsSummary {
  size_t epochs = 0;           // epochs the figures are the medians of
  bool first_dropped = false;  // warm-up epochs were left out (start-up, autotuning, graph capture)
  double images_per_s = 0;
  Utilisation util;
  std::optional<double> data_wait_share;  // data_wait_s / wall_s
  std::optional<double> communication_ms_per_step;
  bool cuda_graph = false;  // the measured epochs replayed a CUDA graph
};

// The epochs a run's figures come from: all but the warm-up ones (Record::warm_up: each process's first epoch, an
// epoch resumed mid-way) when any other is left; `first_dropped` says whether any was left out.
std::vector<Record> measured_epochs(const std::vector<Record>& epochs, bool* first_dropped = nullptr);

// Medians over `epochs` (all of them: measured_epochs chooses). Throws DataError naming `source` when an epoch has no
// images_per_s or there are none.
EpochsSummary summarise(const std::vector<Record>& epochs, const std::string& source);

// Configuration keys and values ("precision" -> "fp16"), from a run folder's configuration or an ablation command.
using Settings = std::vector<std::pair<std::string, std::string>>;
std::string setting(const Settings& settings, const std::string& key);  // "" when absent

// "--batch-size 256 --tf32=off --cuda-graph" -> batch_size 256, tf32 off, cuda_graph on.
Settings settings_of_command(const std::string& command);

SwitchFacts switch_facts(const Settings& settings);
// "fp16 autocast, TF32 default, channels-last, cuDNN autotune, CUDA graph, 16 pinned decode threads".
std::string describe_switches(const Settings& settings);
// "synthetic" or "jpeg" (folder data, decoded on the CPU or the GPU).
std::string data_kind(const Settings& settings);

}  // namespace rn50::report
