// trainer/cuda_step_timer.cpp: StepTimer on CUDA events of the current stream, read lazily (CUDA builds).
#include <ATen/cuda/CUDAContext.h>

#include <deque>
#include <memory>
#include <vector>

#include "cuda/cuda_check.h"
#include "cuda/cuda_event.h"
#include "trainer/step_timer.h"

namespace rn50::trainer {

namespace {

class CudaStepTimer final : public StepTimer {
 public:
  void begin_step() override {
    const size_t begin = record();
    if (marked_) pending_.push_back({static_cast<int>(Phase::kBetweenSteps), start_, begin});
    start_ = begin;
  }
  void mark(Phase phase) override {
    const size_t end = record();
    pending_.push_back({static_cast<int>(phase), start_, end});
    start_ = end;
    marked_ = true;
  }
  PhaseTimes take_totals() override {
    while (!pending_.empty()) settle_oldest();
    const PhaseTimes out = times_;
    times_ = {};
    marked_ = false;
    return out;
  }

 private:
  struct Interval {
    int phase;
    size_t start, end;
  };
  // Events live in a ring; an interval is read (its events long complete) before its slot is reused.
  size_t record() {
    if (events_.size() < kRing) events_.push_back(std::make_unique<cuda::Event>());
    const size_t index = cursor_++ % kRing;
    if (cursor_ > kRing) {
      while (!pending_.empty() && uses(pending_.front(), index)) settle_oldest();
    }
    RN50_CUDA_CHECK(cudaEventRecord(events_[index]->event, at::cuda::getCurrentCUDAStream().stream()));
    return index;
  }
  static bool uses(const Interval& i, size_t index) { return i.start == index || i.end == index; }
  void settle_oldest() {
    const Interval i = pending_.front();
    pending_.pop_front();
    RN50_CUDA_CHECK(cudaEventSynchronize(events_[i.end]->event));
    times_.add(static_cast<Phase>(i.phase), cuda::elapsed_seconds(events_[i.start]->event, events_[i.end]->event));
  }
  static constexpr size_t kRing = 1024;
  std::vector<std::unique_ptr<cuda::Event>> events_;
  size_t cursor_ = 0;
  size_t start_ = 0;
  bool marked_ = false;  // a mark since take_totals: the next begin_step ends a gap between steps
  std::deque<Interval> pending_;
  PhaseTimes times_;
};

}  // namespace

std::unique_ptr<StepTimer> make_cuda_step_timer() { return std::make_unique<CudaStepTimer>(); }

}  // namespace rn50::trainer
