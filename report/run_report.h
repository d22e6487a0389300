// report/run_report.h: `rn50 report RUN_DIR`, and the end of `rn50 train`: one self-contained HTML page of a run
// (inline SVG, no script, nothing fetched): loss, accuracy, learning rate, speed and utilisation per epoch and per
// step record, input wait and bad samples, the resolved configuration and the machine (torch-free).
#pragma once

#include <cstdint>
#include <string>

namespace rn50::report {

inline constexpr char kRunReportFile[] = "report.html";

struct RunReport {
  std::string path;  // the page written
  size_t epochs = 0, steps = 0;
  int64_t skipped_lines = 0;
};

// The page's HTML for the run in `run_dir` (read_run_folder: throws DataError without a metrics file).
std::string render_run_report(const std::string& run_dir);
// Writes it to `out_path` ("" = run_dir/report.html) atomically.
RunReport write_run_report(const std::string& run_dir, const std::string& out_path = "");

}  // namespace rn50::report
