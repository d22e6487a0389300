// trainer/lr_schedule.cpp: warm-up, cosine, step and exponential learning-rate schedules.
#include "trainer/lr_schedule.h"

#include <algorithm>
#include <cmath>

namespace rn50::trainer {

double LrSchedule::at(int64_t step) const {
  const int64_t warmup_steps = static_cast<int64_t>(std::llround(warmup_epochs * steps_per_epoch));
  if (step < warmup_steps) return peak_lr * static_cast<double>(step + 1) / static_cast<double>(warmup_steps);
  if (decay == Decay::kStep) {
    const int64_t epoch = step / std::max<int64_t>(1, steps_per_epoch);
    const auto passed = std::count_if(milestones.begin(), milestones.end(), [&](int m) { return epoch >= m; });
    return peak_lr * std::pow(gamma, static_cast<double>(passed));
  }
  if (decay == Decay::kExponential) {  // whole epochs since warm-up ended, as torchvision's SequentialLR counts them
    const int64_t epochs_since = (step - warmup_steps) / std::max<int64_t>(1, steps_per_epoch);
    return peak_lr * std::pow(gamma, static_cast<double>(epochs_since));
  }
  const int64_t total = static_cast<int64_t>(epochs) * steps_per_epoch;
  const int64_t decay_steps = std::max<int64_t>(1, total - warmup_steps);
  const double progress = std::min(1.0, static_cast<double>(step - warmup_steps) / static_cast<double>(decay_steps));
  return 0.5 * peak_lr * (1.0 + std::cos(M_PI * progress));
}

double scaled_lr(double lr_per_256, int64_t global_batch) {
  return lr_per_256 * static_cast<double>(global_batch) / 256.0;
}

}  // namespace rn50::trainer
