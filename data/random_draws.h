// data/random_draws.h: seed mixing (splitmix64) and random draws that give the same numbers with every
// standard library (the std:: distributions are implementation-defined, std::mt19937_64 itself is not).
#pragma once

#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <random>

namespace rn50::data::detail {

// One step of splitmix64: a bijective 64-bit mix, good enough to turn neighbouring integers into
// unrelated seeds.
inline uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// Folds several values into one seed; the order of the values matters, so (a, b) and (b, a) differ.
inline uint64_t mix_seed(std::initializer_list<uint64_t> values) {
  uint64_t state = 0x6a09e667f3bcc909ULL;
  for (uint64_t value : values) state = splitmix64(state ^ splitmix64(value));
  return state;
}

// Uniform double in [0, 1) from the top 53 bits of one draw.
inline double uniform_unit(std::mt19937_64& rng) { return static_cast<double>(rng() >> 11) * 0x1.0p-53; }

// Uniform double in [lo, hi).
inline double uniform_real(std::mt19937_64& rng, double lo, double hi) { return lo + (hi - lo) * uniform_unit(rng); }

// Unbiased uniform integer in [0, n) for n >= 1, by rejecting the few draws that would favour small values.
inline uint64_t uniform_below(std::mt19937_64& rng, uint64_t n) {
  if (n <= 1) return 0;
  const uint64_t threshold = (0 - n) % n;  // 2^64 mod n: draws below it are rejected
  uint64_t draw = rng();
  while (draw < threshold) draw = rng();
  return draw % n;
}

// Uniform integer in [lo, hi], both inclusive; requires lo <= hi.
inline int64_t uniform_int(std::mt19937_64& rng, int64_t lo, int64_t hi) {
  const uint64_t span = static_cast<uint64_t>(hi) - static_cast<uint64_t>(lo);
  if (span == UINT64_MAX) return static_cast<int64_t>(rng());
  return static_cast<int64_t>(static_cast<uint64_t>(lo) + uniform_below(rng, span + 1));
}

// Standard normal draw (Box-Muller on the portable uniform draws).
inline double normal(std::mt19937_64& rng) {
  const double u1 = 1.0 - uniform_unit(rng);  // (0, 1]: log stays finite
  const double u2 = uniform_unit(rng);
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
}

}  // namespace rn50::data::detail
