// trainer/summary_csv.h: summary.csv, one row per epoch record of the run with timm's columns (epoch, train_loss,
// eval_loss, eval_top1, eval_top5, lr) and rn50's (images_per_s, wall_s, data_wait_s), rewritten atomically after
// each epoch (torch-free).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "trainer/metrics.h"

namespace rn50::trainer {

inline constexpr char kSummaryCsvFile[] = "summary.csv";

class SummaryCsv final : public RecordSink {
 public:
  // Writes `path` at once: a fresh run's header alone, or a resumed run's rows so far, from the epoch records of the
  // last run in `metrics_path` (read after the metrics file's resume repair, so the two agree).
  SummaryCsv(const std::string& path, const std::string& metrics_path, bool resumed);
  std::string name() const override { return path_; }
  void write(const EpochRecord& record) override;

  // The header line's columns; top-1 and top-5 in percent, as timm writes them (metrics.jsonl keeps fractions).
  static const std::vector<std::string>& columns();

 private:
  void rewrite() const;
  std::string path_;
  std::vector<std::vector<std::optional<double>>> rows_;
};

}  // namespace rn50::trainer
