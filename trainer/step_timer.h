// trainer/step_timer.h: where a training step's time goes: input copy, forward+backward, optimizer, communication.
#pragma once

#include <array>
#include <chrono>
#include <string>

namespace rn50::trainer {

enum class Phase { kInput = 0, kForwardBackward, kOptimizer, kCommunication };
inline constexpr int kNumPhases = 4;
inline constexpr const char* kPhaseNames[kNumPhases] = {"input_s", "forward_backward_s", "optimizer_s", "communication_s"};

// Marks the end of each phase; the time of a phase runs from the previous mark (or begin_step).
// The CUDA version records events on the compute stream and reads them lazily, without host syncs in
// the step; this one uses the host clock, which is right where ops run synchronously (the CPU).
class StepTimer {
 public:
  virtual ~StepTimer() = default;
  virtual void begin_step() = 0;
  virtual void mark(Phase phase) = 0;
  // Seconds per phase since the last call (waits for outstanding device work to finish).
  virtual std::array<double, kNumPhases> take_totals() = 0;
};

class HostStepTimer final : public StepTimer {
 public:
  void begin_step() override { last_ = Clock::now(); }
  void mark(Phase phase) override {
    const auto now = Clock::now();
    totals_[static_cast<int>(phase)] += std::chrono::duration<double>(now - last_).count();
    last_ = now;
  }
  std::array<double, kNumPhases> take_totals() override {
    auto out = totals_;
    totals_ = {};
    return out;
  }

 private:
  using Clock = std::chrono::steady_clock;
  Clock::time_point last_ = Clock::now();
  std::array<double, kNumPhases> totals_{};
};

}  // namespace rn50::trainer
