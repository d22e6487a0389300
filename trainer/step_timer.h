// trainer/step_timer.h: where a training step's time goes: input copy, forward+backward, optimizer, communication.
#pragma once

#include <algorithm>
#include <array>
#include <chrono>
#include <string>

namespace rn50::trainer {

enum class Phase { kInput = 0, kForwardBackward, kOptimizer, kCommunication };
inline constexpr int kNumPhases = 4;
inline constexpr const char* kPhaseNames[kNumPhases] = {"input_s", "forward_backward_s", "optimizer_s", "communication_s"};

// Seconds per phase over a span of steps: in all, and the longest single interval (one step's phase, unless a
// phase is marked more than once a step). The longest tells a steady cost from one slow step.
struct PhaseTimes {
  std::array<double, kNumPhases> total{};
  std::array<double, kNumPhases> slowest{};
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

class HostStepTimer final : public StepTimer {
 public:
  void begin_step() override { last_ = Clock::now(); }
  void mark(Phase phase) override {
    const auto now = Clock::now();
    const double seconds = std::chrono::duration<double>(now - last_).count();
    const int p = static_cast<int>(phase);
    times_.total[p] += seconds;
    times_.slowest[p] = std::max(times_.slowest[p], seconds);
    last_ = now;
  }
  PhaseTimes take_totals() override {
    const PhaseTimes out = times_;
    times_ = {};
    return out;
  }

 private:
  using Clock = std::chrono::steady_clock;
  Clock::time_point last_ = Clock::now();
  PhaseTimes times_;
};

}  // namespace rn50::trainer
