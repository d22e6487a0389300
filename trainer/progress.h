// trainer/progress.h: how far an epoch has come and when it and the run will end, from the host clock alone (no device
// sync): the live status line where stdout is a terminal, and the time-left part of the step log lines (torch-free).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/clock.h"

namespace rn50::trainer {

// "42s", "12m05s", "3h07m", "2d04h": the two largest units, as a person reads a countdown.
std::string format_duration(double seconds);

class EpochProgress {
 public:
  // `show` draws the live line from its forms, longest first (set_status_line); empty: no live line, only time_left for
  // the log lines.
  // `mean_epoch_s`: the whole epochs this process has finished, validation included (0 when none yet), for the
  // run's time left; without one, the epochs ahead are taken to be as long as this one's training part.
  // `first_step`: the steps of the epoch done before `start` (a run resumed mid-epoch), not counted in its rate.
  EpochProgress(int64_t epoch, int64_t epochs, int64_t steps, int64_t images_per_step, double mean_epoch_s,
                Clock::time_point start, std::function<void(const std::vector<std::string>&)> show,
                int64_t first_step = 0);
  ~EpochProgress();  // removes the live line
  EpochProgress(const EpochProgress&) = delete;
  EpochProgress& operator=(const EpochProgress&) = delete;

  // After step `done` (1-based) was queued: redraws the line, at most twice a second and at the last step.
  void step_done(int64_t done, Clock::time_point now);
  // "epoch 3/90: 1234/5004 steps (24.7%), 5843 img/s, 12m31s left in the epoch, 7h58m in the run".
  std::string line(int64_t done, Clock::time_point now) const;
  // The line and shorter forms for narrow terminals, each with the time left: "epoch 3/90 24.7%, 5843 img/s, 12m31s
  // left, run 7h58m" and "3/90 24.7% 12m31s left".
  std::vector<std::string> forms(int64_t done, Clock::time_point now) const;
  // "12m31s left in the epoch, 7h58m in the run" (the step log line's tail).
  std::string time_left(int64_t done, Clock::time_point now) const;

 private:
  // Seconds left in the epoch and the run after `done` steps; false before the first.
  bool estimate(int64_t done, Clock::time_point now, double* epoch_left, double* run_left) const;

  const int64_t epoch_, epochs_, steps_, images_per_step_, first_step_;
  const double mean_epoch_s_;
  const Clock::time_point start_;
  const std::function<void(const std::vector<std::string>&)> show_;
  Clock::time_point last_drawn_{};
};

}  // namespace rn50::trainer
