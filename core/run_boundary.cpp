// core/run_boundary.cpp: RunBoundary's rule.
#include "core/run_boundary.h"

namespace rn50 {

bool RunBoundary::starts_run(const std::string& type, std::optional<double> epoch, std::optional<double> step,
                             bool fresh) {
  bool restarts = false;
  if (type == "start") restarts = fresh;
  if (type == "epoch" && epoch) restarts = *epoch <= last_epoch_;
  if (type == "step" && epoch) restarts = (step && *step <= last_step_) || *epoch <= last_epoch_;
  if (restarts) last_epoch_ = last_step_ = -1;
  if (type == "epoch" && epoch) last_epoch_ = *epoch;
  if (type == "step" && step) last_step_ = *step;
  if (restarts || runs_ == 0) {
    ++runs_;
    return true;
  }
  return false;
}

}  // namespace rn50
