// trainer/metrics.h: the JSON-lines metrics file: one record per epoch, one every log_every steps, and one where a
// signal stopped the run.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/run_boundary.h"

namespace rn50::trainer {

struct StepRecord {
  int64_t epoch = 0;
  int64_t step = 0;  // global optimizer step
  double loss = 0;   // mean training loss of the steps since the last record
  double lr = 0;
  double images_per_s = 0;
  // The GPU's utilisation over the interval (the sampler's means); nullopt is written as null ("unavailable").
  std::vector<std::pair<std::string, std::optional<double>>> extra = {};
};

struct EpochRecord {
  int64_t epoch = 0;
  int64_t steps = 0;
  int64_t resumed_at_step = 0;  // an epoch resumed mid-way: the steps before it, in another process's record (if any)
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
  int64_t bad_samples = 0;            // training's and validation's
  int64_t val_bad_samples = 0;        // validation's, skipped: its figures are over val_images
  std::optional<int64_t> val_images;  // validated images (none: not validated)
  // Named extras (utilisation and the like); nullopt is written as null ("unavailable"), never 0.
  std::vector<std::pair<std::string, std::optional<double>>> extra;
};

// A run stopped by a signal mid-epoch (or during validation): where, and how far the epoch had come.
struct StopRecord {
  int64_t epoch = 0;       // 1-based, as the epoch records
  int64_t step = 0;        // global optimizer steps done
  int64_t epoch_step = 0;  // steps done of this epoch (its steps_per_epoch when it stopped during validation)
  std::string signal;
  double wall_s = 0;      // of the epoch so far
  double train_loss = 0;  // mean over the epoch's steps so far (0 when none ran)
};

// Where a resumed run continues: records after it in the file belong to the interrupted run's lost work.
struct ResumePoint {
  int64_t epoch = 0;  // epochs completed
  int64_t step = 0;   // optimizer steps completed
};

// The first line a run (each process of rank 0: a fresh run or a resume) writes to the file:
// {"type":"start","resumed":false,"epoch":0,"step":0}. A fresh run's start record begins another run in the file, so
// that a run stopped before its first epoch record is not read as the earlier run it was appended to.
struct StartRecord {
  bool resumed = false;
  int64_t epoch = 0;  // where it starts: the epochs and steps completed (0 for a fresh run)
  int64_t step = 0;
};

// The best top-1 among the epoch records of a metrics file and its epoch (none without validation records): where a
// resumed run's best checkpoint stands.
struct BestEpoch {
  int64_t epoch = 0;
  double top1 = 0;
};
std::optional<BestEpoch> best_epoch_in(const std::string& path);

// Where a record goes besides the metrics file (TensorBoard's event file, summary.csv): each is given the record
// after its line is in the metrics file, which stays the run's record of truth.
class RecordSink {
 public:
  virtual ~RecordSink() = default;
  virtual std::string name() const = 0;  // for the warning when it fails
  virtual void write(const StepRecord&) {}
  virtual void write(const EpochRecord&) {}
};

class MetricsLog {
 public:
  // Appends to `path`, one write per record, so that a record is whole or, when the disk fills up mid-write, the
  // only torn line. A torn last line left by an earlier run is cut off (with the returned warning); with `resume`,
  // records of its run past it are dropped too, so that the resumed run does not repeat them (an earlier run's stay,
  // as history). Then writes the start record.
  explicit MetricsLog(const std::string& path, const std::optional<ResumePoint>& resume = std::nullopt);
  ~MetricsLog();
  MetricsLog(const MetricsLog&) = delete;
  MetricsLog& operator=(const MetricsLog&) = delete;
  void write(const StepRecord& record);
  void write(const EpochRecord& record);
  void write(const StopRecord& record);
  // Each record written from now on goes to `sink` too. A sink that throws is dropped with a warning: the curves are
  // a view of the metrics, and a run is not stopped for them.
  void add_sink(std::unique_ptr<RecordSink> sink);
  // What opening the file repaired ("" when nothing), for the log.
  const std::string& repaired() const { return repaired_; }

 private:
  void write_line(const std::string& line);
  template <typename Record>
  void to_sinks(const Record& record);
  int fd_ = -1;
  std::string path_;
  std::string repaired_;
  std::vector<std::unique_ptr<RecordSink>> sinks_;
};

}  // namespace rn50::trainer
