// trainer/progress.cpp: the epoch's progress line and time-left estimates.
#include "trainer/progress.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <utility>

#include "core/log.h"

namespace rn50::trainer {
namespace {

constexpr std::chrono::milliseconds kRedrawEvery{500};

}  // namespace

std::string format_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  const auto s = static_cast<long long>(std::llround(seconds));
  if (s < 60) return strprintf("%llds", s);
  if (s < 3600) return strprintf("%lldm%02llds", s / 60, s % 60);
  if (s < 86400) return strprintf("%lldh%02lldm", s / 3600, s / 60 % 60);
  return strprintf("%lldd%02lldh", s / 86400, s / 3600 % 24);
}

EpochProgress::EpochProgress(int64_t epoch, int64_t epochs, int64_t steps, int64_t images_per_step, double mean_epoch_s,
                             Clock::time_point start, std::function<void(const std::vector<std::string>&)> show,
                             int64_t first_step)
    : epoch_(epoch),
      epochs_(epochs),
      steps_(steps),
      images_per_step_(images_per_step),
      first_step_(first_step),
      mean_epoch_s_(mean_epoch_s),
      start_(start),
      show_(std::move(show)) {}

EpochProgress::~EpochProgress() {
  if (show_) show_({});
}

void EpochProgress::step_done(int64_t done, Clock::time_point now) {
  if (!show_ || (done < steps_ && now - last_drawn_ < kRedrawEvery)) return;
  last_drawn_ = now;
  show_(forms(done, now));
}

bool EpochProgress::estimate(int64_t done, Clock::time_point now, double* epoch_left, double* run_left) const {
  const double elapsed = std::chrono::duration<double>(now - start_).count();
  if (done <= first_step_ || elapsed <= 0) return false;
  const double per_step = elapsed / static_cast<double>(done - first_step_);
  *epoch_left = per_step * static_cast<double>(steps_ - done);
  const double epoch_length = mean_epoch_s_ > 0 ? mean_epoch_s_ : per_step * static_cast<double>(steps_);
  *run_left = *epoch_left + epoch_length * static_cast<double>(std::max<int64_t>(0, epochs_ - epoch_));
  return true;
}

std::string EpochProgress::time_left(int64_t done, Clock::time_point now) const {
  double epoch_left = 0, run_left = 0;
  if (!estimate(done, now, &epoch_left, &run_left)) return "time left unknown yet";
  return format_duration(epoch_left) + " left in the epoch, " + format_duration(run_left) + " in the run";
}

std::string EpochProgress::line(int64_t done, Clock::time_point now) const { return forms(done, now).front(); }

std::vector<std::string> EpochProgress::forms(int64_t done, Clock::time_point now) const {
  const double elapsed = std::chrono::duration<double>(now - start_).count();
  const double rate = elapsed > 0 ? static_cast<double>((done - first_step_) * images_per_step_) / elapsed : 0;
  const double percent = 100.0 * static_cast<double>(done) / static_cast<double>(std::max<int64_t>(1, steps_));
  const auto e = static_cast<long long>(epoch_), n = static_cast<long long>(epochs_);
  double epoch_s = 0, run_s = 0;
  const bool known = estimate(done, now, &epoch_s, &run_s);
  const std::string epoch_left = known ? format_duration(epoch_s) : "?",
                    run_left = known ? format_duration(run_s) : "?";
  return {strprintf("epoch %lld/%lld: %lld/%lld steps (%.1f%%), %s img/s, ", e, n, static_cast<long long>(done),
                    static_cast<long long>(steps_), percent, format_rate(rate).c_str()) +
              time_left(done, now),
          strprintf("epoch %lld/%lld %.1f%%, %s img/s, %s left, run %s", e, n, percent, format_rate(rate).c_str(),
                    epoch_left.c_str(), run_left.c_str()),
          strprintf("%lld/%lld %.1f%% %s left", e, n, percent, epoch_left.c_str())};
}

}  // namespace rn50::trainer
