// tests/support/seeded_rng.h: defines test_rng(), a random generator whose seed is printed, and taken from
// RN50_TEST_SEED when set, so that a failure seen once on fresh random inputs can be run again.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <stdexcept>
#include <string>

namespace rn50::test {

// A generator seeded from RN50_TEST_SEED if set, else from the system's entropy; prints the seed either way.
inline std::mt19937 test_rng() {
  uint32_t seed = std::random_device{}();
  if (const char* fixed = std::getenv("RN50_TEST_SEED"); fixed != nullptr && *fixed != '\0') {
    // Strict: a mistyped seed would otherwise run some other seed's inputs and pass for the failing one.
    char* end = nullptr;
    const unsigned long long value = std::strtoull(fixed, &end, 10);
    if (fixed[0] < '0' || fixed[0] > '9' || *end != '\0' || value > UINT32_MAX) {
      throw std::invalid_argument("RN50_TEST_SEED is not a number from 0 to 4294967295: '" + std::string(fixed) + "'");
    }
    seed = static_cast<uint32_t>(value);
  }
  std::printf("random seed %u (RN50_TEST_SEED=%u repeats it)\n", seed, seed);
  return std::mt19937(seed);
}

}  // namespace rn50::test
