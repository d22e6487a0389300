// report/records.h: what rn50 wrote, read back for the reports: a metrics file (torn or stray lines skipped and
// counted, runs appended to one file told apart), and a run folder's configuration and machine (torch-free).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace rn50::report {

using Rows = std::vector<std::pair<std::string, std::string>>;

// One record's numbers by key; null (unavailable) is nullopt. Other values (the record's type) are not kept.
struct Record {
  std::map<std::string, std::optional<double>> fields;
  // An epoch record that is a process's first (warm-up: a fresh run's first, or the first after a resume) or an
  // epoch resumed mid-way (resumed_at_step: its figures cover part of it): left out of the medians.
  bool warm_up = false;
  std::optional<double> get(const std::string& key) const;
  bool has(const std::string& key) const { return fields.count(key) > 0; }
};

// Step records kept of a run: beyond this, every second one of those kept goes (again as often as it takes), so
// that memory and the page stay bounded (a 90-epoch run logging every step is 450,000 records: 1.9 GB and a
// 167 MB page when all were kept).
inline constexpr size_t kMaxStepRecords = 16384;

struct MetricsFile {
  std::string path;
  std::vector<Record> epochs, steps;  // of the last run in the file, in file order; steps: every step_stride-th
  int64_t step_records = 0;           // the last run's step records, all of them
  int64_t step_stride = 1;            // steps holds its records 0, stride, 2 stride, ...
  int64_t lines = 0;                  // lines in the file
  int64_t skipped = 0;                // lines that are no record: torn, not JSON, no known type
  int64_t long_lines = 0;             // lines over kMaxLineBytes: skipped unread (also in `lines`)
  int runs = 0;  // runs appended one after another (a fresh run in the same out_dir starts again at epoch 1)
  int64_t stops = 0, resumes = 0;  // of the last run: its stop records (a signal) and its resumes
  std::string last_stop;           // the last stop record in words ("SIGTERM in epoch 2 after 5 of its steps")
};

// The files the reports read are read line by line (files::LineReader): at most kMaxMetricsBytes a file (metrics.jsonl,
// train.log), and a line over kMaxLineBytes is skipped and counted, never held (a record is a few KB).
inline constexpr uint64_t kMaxMetricsBytes = uint64_t{1} << 30;
inline constexpr size_t kMaxLineBytes = size_t{1} << 20;

// Every line of `path`; throws DataError naming the file when it cannot be read.
MetricsFile read_metrics(const std::string& path);

struct RunFolder {
  std::string dir;
  MetricsFile metrics;
  Rows config;                      // the resolved configuration, key by key
  std::string config_from;          // "config.yaml", "train.log", or "" when neither was found
  Rows machine;                     // what the run ran on: host, CPU, memory, processes, device, kernels, input ...
  std::string machine_from;         // "run.json", "train.log" or ""
  int world_size = 1;               // processes (GPUs on a GPU run)
  // run.json's host load before the run trained: the 1-minute load average and the CPUs it counts against (the
  // host's online CPUs; the usable cores in a run.json from before they were recorded). None before run.json had it.
  std::optional<double> load_average;
  int load_cores = 0;
  bool cuda = false;                // trained on a GPU
  int64_t log_long_lines = 0;       // train.log's lines over kMaxLineBytes, skipped
  std::vector<std::string> unread;  // the folder's other files that are there but could not be read, and why
  std::string value(const std::string& config_key) const;  // "" when absent
  std::string found(const std::string& row) const;         // a machine row ("device", "data parallel"), or ""
};

// dir/metrics.jsonl with dir/config.yaml and dir/run.json, or, for runs before run.json, the start table in
// dir/train.log (the last one: the run the metrics file's last run belongs to). Throws DataError with one line when
// dir is not a readable folder or its metrics.jsonl is missing or cannot be read.
RunFolder read_run_folder(const std::string& dir);

// The start table of the last run in a train.log, fed one line at a time: its rows in order ("" keys never).
class StartTableParser {
 public:
  void add(const std::string& line);
  const Rows& rows() const { return table_; }

 private:
  Rows table_;
  bool inside_ = false;
};

// The start table of the last run in a train.log text.
Rows parse_start_table(const std::string& log_text);
// The same, from the file at `path` read line by line; `long_lines` (if given) counts the lines skipped as too long.
// Throws files::ReadError.
Rows read_start_table(const std::string& path, int64_t* long_lines = nullptr);

// A run folder's name for titles and rows: its last component, "." and ".." resolved ("." was the title).
std::string run_name(const std::string& dir);

// The median of the values present (nullopt when none).
std::optional<double> median(std::vector<double> values);

}  // namespace rn50::report
