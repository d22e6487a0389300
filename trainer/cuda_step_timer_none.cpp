// trainer/cuda_step_timer_none.cpp: the CPU-only build's make_cuda_step_timer, never called (no CUDA device).
#include <stdexcept>

#include "trainer/step_timer.h"

namespace rn50::trainer {

std::unique_ptr<StepTimer> make_cuda_step_timer() {
  throw std::logic_error("make_cuda_step_timer: this rn50 was built without CUDA");
}

}  // namespace rn50::trainer
