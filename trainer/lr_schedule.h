// trainer/lr_schedule.h: the learning rate at every step: linear warm-up, then cosine, step or exponential decay.
#pragma once

#include <cstdint>
#include <vector>

namespace rn50::trainer {

struct LrSchedule {
  enum class Decay { kCosine, kStep, kExponential };  // after warm-up

  double peak_lr = 0.1;  // already scaled for the global batch
  int64_t steps_per_epoch = 1;
  double warmup_epochs = 0.0;
  int epochs = 1;
  Decay decay = Decay::kCosine;
  std::vector<int> milestones;  // step: epochs (from the run's start, warm-up included) at which rate *= gamma
  double gamma = 0.1;  // exponential: the factor each epoch after warm-up (torchvision's StepLR with step_size 1)

  // The rate for 0-based global step `step`. Warm-up rises linearly to peak_lr over its steps (the first
  // step already gets peak/warmup_steps, never 0); cosine then falls toward 0, which it reaches one step after the
  // last.
  double at(int64_t step) const;
};

// Linear scaling rule: lr_per_256 * global_batch / 256.
double scaled_lr(double lr_per_256, int64_t global_batch);

}  // namespace rn50::trainer
