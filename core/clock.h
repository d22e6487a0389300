// core/clock.h: the steady clock rn50 times host work with, and seconds since a point of it.
#pragma once

#include <chrono>

namespace rn50 {

using Clock = std::chrono::steady_clock;

inline double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

}  // namespace rn50
