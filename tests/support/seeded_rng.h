// tests/support/seeded_rng.h: defines test_rng(), a random generator whose seed is printed, and taken from
// RN50_TEST_SEED when set, so that a failure seen once on fresh random inputs can be run again.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>

namespace rn50::test {

// A generator seeded from RN50_TEST_SEED if set, else from the system's entropy; prints the seed either way.
inline std::mt19937 test_rng() {
  uint32_t seed = std::random_device{}();
  if (const char* fixed = std::getenv("RN50_TEST_SEED"); fixed != nullptr && *fixed != '\0') {
    seed = static_cast<uint32_t>(std::strtoul(fixed, nullptr, 10));
  }
  std::printf("random seed %u (RN50_TEST_SEED=%u repeats it)\n", seed, seed);
  return std::mt19937(seed);
}

}  // namespace rn50::test
