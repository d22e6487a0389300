// core/run_boundary.h: RunBoundary, which tells apart the runs appended to one metrics file (trainer/metrics.h
// writes the records; the trainer's resume, summary.csv and the reports read them back).
#pragma once

#include <optional>
#include <string>

namespace rn50 {

// Tells the runs appended to one metrics file apart, record by record (in file order): a fresh run's start record
// begins one, and so does numbering that goes back (files from before start records: an epoch record at or below
// the last epoch, a step record at or below the last step or epoch). A resumed run continues its run (its file is
// cut at the checkpoint); its start record marks the first epoch of a new process.
class RunBoundary {
 public:
  // Whether this record begins another run (true for the file's first record). `type` is "start", "epoch", "step"
  // or "stop"; `fresh` is a start record's !resumed.
  bool starts_run(const std::string& type, std::optional<double> epoch, std::optional<double> step, bool fresh);
  int runs() const { return runs_; }

 private:
  int runs_ = 0;
  double last_epoch_ = -1, last_step_ = -1;
};

}  // namespace rn50
