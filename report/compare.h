// report/compare.h: `rn50 compare`: result files from any number of machines (ablation.json files, run folders) side
// by side, as the source's table: speed, projected ImageNet epoch and run, utilisation, input wait, all-reduce,
// and with prices the cost and the break-even speed-up over a reference row (torch-free).
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "report/reading.h"
#include "report/summary.h"

namespace rn50::report {

struct CompareOptions {
  std::vector<std::string> inputs;                         // ablation.json files or run folders
  std::vector<std::pair<std::string, std::string>> names;  // input -> machine name (else from the file)
  std::vector<std::pair<std::string, double>> prices;      // machine name (or its first words) -> per GPU-hour
  std::string prices_file;                                 // "NAME: PRICE" lines (YAML)
  std::string reference;                                   // a row number, or words of its machine/configuration
  std::vector<std::string> labels = {"baseline", "all"};   // the configurations taken from ablation files
  std::string data = "synthetic";                          // ablation files: synthetic | jpeg
  std::vector<int> batches;                                // ablation files: these batch sizes (empty: all)
  int epochs = 90;                                         // the run the projection and cost are for
};

// One row: one configuration on one machine, and what it projects to.
struct CompareRow {
  std::string source;         // the file, and in an ablation which run
  std::string machine;        // "H200 x2", "CPU (2 cores)"
  std::string device;         // the start table's device row, or the CPU's model
  std::string configuration;  // the ablation's label or the run folder's name
  std::string switches;       // describe_switches
  std::string model, data;
  int image_size = 0, batch = 0, processes = 1;
  bool cuda = false;
  EpochsSummary figures;
  SwitchFacts facts;
  std::string reading;  // read_utilisation
  // The noise of the row's own rates: (max - min) / median of its measured epochs' images/s, or where it measured
  // one epoch of its step records' (each epoch's first left out: it holds the epoch's start); none from fewer than 2.
  std::optional<double> spread;
  std::string spread_of;            // "epochs" or "step records"
  double slowest = 0, fastest = 0;  // the rates the spread is of
  // The host's 1-minute load average before the run trained and the CPUs it counts against (run.json; run folders).
  std::optional<double> load_average;
  int load_cores = 0;
  // The most cores other processes kept busy during one of the measured epochs (the epoch records' others_cpu_cores;
  // none in records from before they had it).
  std::optional<double> others_cores;
  // Other work took a share of the host: measured over the epochs where they say (more than a quarter of its cores
  // busy with other processes), else the load average before the run (above its cores). The load average alone also
  // flagged a run started right after another, whose load it still held for minutes.
  bool loaded() const {
    if (others_cores && load_cores > 0) return *others_cores > kOthersShare * load_cores;
    return load_average && load_cores > 0 && *load_average > load_cores;
  }
  static constexpr double kOthersShare = 0.25;
  // Projections: an ImageNet epoch and `epochs` of them at the measured rate.
  double epoch_s = 0, run_s = 0;
  double speedup = 0;  // images/s over the reference row's
  std::optional<double> price_per_gpu_hour, price_per_hour, cost_per_epoch, cost_per_run, break_even;
};

struct Comparison {
  std::vector<CompareRow> rows;
  size_t reference = 0;
  int epochs = 90;
  std::string across;  // read_across; "" when NVML's figure does not mislead here
  // Where a ratio between rows is not what the machines measure: a loaded host, a difference within the rows' own
  // spread, a row whose rates spread widely. Each names its rows and the figures behind it.
  std::vector<std::string> warnings;
};

// A row whose rates spread by more than this is worth a warning of its own.
inline constexpr double kWideSpread = 0.10;

// The warnings of rows whose speed-ups and spreads are set (compare() calls it; public for the tests).
std::vector<std::string> noise_warnings(const std::vector<CompareRow>& rows, size_t reference);

// Reads and checks every input; throws DataError (a result file that is incomplete or does not compare) or
// ConfigError (an option that names nothing) with one line.
Comparison compare(const CompareOptions& options);

std::string comparison_markdown(const Comparison& comparison);
std::string comparison_json(const Comparison& comparison);

// Writes compare.md, compare.json, throughput.svg, utilisation.svg and, with prices, cost.svg into `dir`.
std::vector<std::string> write_comparison(const Comparison& comparison, const std::string& dir);

// The projection's arithmetic, also for the tests: hours of `epochs` ImageNet epochs, cost at a price per hour.
struct Projection {
  double epoch_s = 0, run_s = 0;
  std::optional<double> price_per_hour, cost_per_epoch, cost_per_run;
};
Projection project(double images_per_s, int epochs, int gpus, std::optional<double> price_per_gpu_hour);

// A price for `machine`: the entry whose name is the machine's or its first words ("H200" for "H200 x2"),
// case-insensitive; the longest such name wins.
std::optional<double> price_for(const std::vector<std::pair<std::string, double>>& prices, const std::string& machine);

}  // namespace rn50::report
