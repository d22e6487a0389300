// trainer/step_timer.h: where a training step's time goes: input copy, forward+backward, optimizer, communication,
// and the time between one step's last mark and the next step's start.
#pragma once

#include <algorithm>
#include <array>
#include <chrono>
#include <memory>
#include <string>

#include "core/clock.h"

namespace rn50::trainer {

// kBetweenSteps is not marked: the timer measures it from a step's last mark to the next begin_step. On the device
// it is the compute stream waiting for the host to queue the next step (plus the few untimed kernels queued
// between steps); the first step after take_totals has none, so that a span's gaps exclude what ran between spans.
enum class Phase { kInput = 0, kForwardBackward, kOptimizer, kCommunication, kBetweenSteps };
inline constexpr int kNumPhases = 5;
inline constexpr const char* kPhaseNames[kNumPhases] = {"input_s", "forward_backward_s", "optimizer_s",
                                                        "communication_s", "between_steps_s"};

// Seconds per phase over a span of steps: in all, and the longest single interval (one step's phase, unless a
// phase is marked more than once a step). The longest tells a steady cost from one slow step.
struct PhaseTimes {
  std::array<double, kNumPhases> total{};
  std::array<double, kNumPhases> slowest{};
  void add(Phase phase, double seconds) {
    const int p = static_cast<int>(phase);
    total[p] += seconds;
    slowest[p] = std::max(slowest[p], seconds);
  }
};

// Marks the end of each phase; the time of a phase runs from the previous mark (or begin_step).
// The CUDA version records events on the compute stream and reads them lazily, without host syncs in
// the step; this one uses the host clock, which is right where ops run synchronously (the CPU).
class StepTimer {
 public:
  virtual ~StepTimer() = default;
  virtual void begin_step() = 0;
  virtual void mark(Phase phase) = 0;
  // The phases' times since the last call (waits for outstanding device work to finish).
  virtual PhaseTimes take_totals() = 0;
};

// StepTimer on CUDA events of the current stream (trainer/cuda_step_timer.cpp; CPU builds throw).
std::unique_ptr<StepTimer> make_cuda_step_timer();

class HostStepTimer final : public StepTimer {
 public:
  void begin_step() override {
    const auto now = Clock::now();
    if (marked_) times_.add(Phase::kBetweenSteps, seconds(now));
    last_ = now;
  }
  void mark(Phase phase) override {
    const auto now = Clock::now();
    times_.add(phase, seconds(now));
    last_ = now;
    marked_ = true;
  }
  PhaseTimes take_totals() override {
    const PhaseTimes out = times_;
    times_ = {};
    marked_ = false;
    return out;
  }

 private:
  double seconds(Clock::time_point now) const { return std::chrono::duration<double>(now - last_).count(); }
  Clock::time_point last_ = Clock::now();
  bool marked_ = false;  // a mark since take_totals: the next begin_step ends a gap between steps
  PhaseTimes times_;
};

}  // namespace rn50::trainer
