// engine/metrics.h: the JSON-lines metrics file: one record per epoch and one every log_every steps.
#pragma once

#include <cstdint>
#include <fstream>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace rn50::engine {

struct StepRecord {
  int64_t epoch = 0;
  int64_t step = 0;  // global optimizer step
  double loss = 0;   // mean training loss of the steps since the last record
  double lr = 0;
  double images_per_s = 0;
};

struct EpochRecord {
  int64_t epoch = 0;
  int64_t steps = 0;
  int64_t images = 0;
  double wall_s = 0;
  double images_per_s = 0;
  double data_wait_s = 0;  // host time blocked on the loader and the input copy
  double compute_s = 0;    // the rest of the epoch's wall time
  double train_loss = 0;
  std::optional<double> val_loss, top1, top5;
  double lr = 0;  // at the epoch's last step
  std::optional<double> peak_gpu_mem_gib;
  double peak_host_rss_gib = 0;
  int64_t bad_samples = 0;
  // Named extras (utilisation and the like); nullopt is written as null ("unavailable"), never 0.
  std::vector<std::pair<std::string, std::optional<double>>> extra;
};

class MetricsLog {
 public:
  explicit MetricsLog(const std::string& path);  // appends: a resumed run continues the same file
  void write(const StepRecord& record);
  void write(const EpochRecord& record);

 private:
  void write_line(const std::string& line);
  std::ofstream out_;
  std::string path_;
};

}  // namespace rn50::engine
