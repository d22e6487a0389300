// tests/ops/test_max_pool_kernels_host.cpp: rn50's max-pool kernels emulated on the host (every thread of each
// launch running the same per-item code as the GPU) against a plain reference of ATen's CPU max_pool2d and its
// backward, on fresh random inputs with ties, zeros, NaN and infinities; the fast division; the plan. Needs the CUDA
// headers (half and bfloat16 types), no GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "ops/max_pool_kernels_impl.cuh"
#include "tests/ops/batch_norm_emulation.h"
#include "tests/support/seeded_rng.h"

namespace rn50::ops::kernels {
namespace {

constexpr int kThreads = cuda::launch::kThreads;

// ---- the launches of ops/max_pool_kernels.cu, thread by thread ------------------------------------------------------

template <typename T, int VEC>
void emulate_forward(const PoolPlan& p, const T* x, T* y, uint8_t* positions) {
  const int64_t threads = static_cast<int64_t>(p.forward_blocks) * kThreads;
  for (int64_t t = 0; t < threads; ++t) {
    if (p.small_window) {
      pool_impl::forward_thread<T, VEC, true>(p, t, threads, x, y, positions);
    } else {
      pool_impl::forward_thread<T, VEC, false>(p, t, threads, x, y, positions);
    }
  }
}

template <typename T, int VEC>
void emulate_backward(const PoolPlan& p, const T* dy, const uint8_t* positions, T* dx) {
  if (p.two_by_two) {  // a thread per output item, on the forward's grid
    const int64_t threads = static_cast<int64_t>(p.forward_blocks) * kThreads;
    for (int64_t t = 0; t < threads; ++t) pool_impl::backward_block_thread<T, VEC>(p, t, threads, dy, positions, dx);
    return;
  }
  const int64_t threads = static_cast<int64_t>(p.backward_blocks) * kThreads;
  for (int64_t t = 0; t < threads; ++t) {
    if (p.few_covers && p.gradients_with_positions) {
      pool_impl::backward_thread<T, VEC, true, true>(p, t, threads, dy, positions, dx);
    } else if (p.few_covers) {
      pool_impl::backward_thread<T, VEC, true, false>(p, t, threads, dy, positions, dx);
    } else {
      pool_impl::backward_thread<T, VEC, false>(p, t, threads, dy, positions, dx);
    }
  }
}

// ---- element types --------------------------------------------------------------------------------------------------

template <typename T>
T of(float v) {
  T t;
  impl::store<T, 1>(&t, {v});
  return t;
}

template <typename T>
float value(T t) {
  return impl::to_float(t);
}

template <typename T>
const char* dtype() {
  if constexpr (std::is_same_v<T, float>) return "float";
  if constexpr (std::is_same_v<T, __half>) return "half";
  return "bfloat16";
}

bool same(float a, float b) { return (std::isnan(a) && std::isnan(b)) || a == b; }

// 16-byte aligned storage, optionally one element off (the scalar path on a vectorisable C), filled with `poison`
// so that an element no thread writes shows.
template <typename E>
struct Buffer {
  std::vector<E> storage;
  E* data = nullptr;
  Buffer(size_t n, bool misalign, E poison) : storage(n + 32 / sizeof(E) + 1, poison) {
    const auto base = reinterpret_cast<uintptr_t>(storage.data());
    data = reinterpret_cast<E*>((base + 15) / 16 * 16) + (misalign ? 1 : 0);
  }
};

// ---- the reference: ATen's CPU max_pool2d and its backward, written plainly ---------------------------------------

struct Reference {
  std::vector<float> y;       // [n][oh][ow][c], the max as float (exact: it is one of T's values)
  std::vector<int> at;        // its position in the window
  std::vector<float> dx;      // [n][h][w][c]: output gradients scattered in output order, summed in float
  std::vector<double> dx64;   // the same sums in double
  std::vector<double> abs64;  // the sums of their magnitudes
};

template <typename T>
Reference reference(const PoolShape& s, int oh, int ow, const std::vector<T>& x, const std::vector<T>& dy) {
  Reference r;
  const int64_t outputs = s.n * oh * ow * s.c;
  r.y.assign(outputs, 0.0f);
  r.at.assign(outputs, -1);
  r.dx.assign(s.n * s.h * s.w * s.c, 0.0f);
  r.dx64.assign(r.dx.size(), 0.0);
  r.abs64.assign(r.dx.size(), 0.0);
  for (int64_t n = 0; n < s.n; ++n) {
    for (int64_t c = 0; c < s.c; ++c) {
      for (int oy = 0; oy < oh; ++oy) {
        for (int ox = 0; ox < ow; ++ox) {
          const int64_t y0 = oy * s.sh - s.ph, x0 = ox * s.sw - s.pw;
          const int64_t y_begin = std::max<int64_t>(y0, 0), y_end = std::min<int64_t>(y0 + s.kh, s.h);
          const int64_t x_begin = std::max<int64_t>(x0, 0), x_end = std::min<int64_t>(x0 + s.kw, s.w);
          double best = -std::numeric_limits<double>::infinity();
          int64_t best_y = y_begin, best_x = x_begin;  // ATen's CPU kernel starts at the first element inside
          for (int64_t iy = y_begin; iy < y_end; ++iy) {
            for (int64_t ix = x_begin; ix < x_end; ++ix) {
              const double v = value(x[((n * s.h + iy) * s.w + ix) * s.c + c]);
              if (v > best || std::isnan(v)) {
                best = v;
                best_y = iy;
                best_x = ix;
              }
            }
          }
          const int64_t o = ((n * oh + oy) * ow + ox) * s.c + c;
          r.y[o] = static_cast<float>(best);
          r.at[o] = static_cast<int>((best_y - y0) * s.kw + (best_x - x0));
          const int64_t i = ((n * s.h + best_y) * s.w + best_x) * s.c + c;
          r.dx[i] += value(dy[o]);
          r.dx64[i] += value(dy[o]);
          r.abs64[i] += std::abs(value(dy[o]));
        }
      }
    }
  }
  return r;
}

// ---- inputs ---------------------------------------------------------------------------------------------------------

// Values as a stem's ReLU output and worse: normal values, small integers (ties), zeros of both signs, NaN and
// infinities; one (image, channel) plane of nothing but -inf, and a NaN block, where the shape has room.
template <typename T>
std::vector<T> random_input(const PoolShape& s, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> u(0.0f, 1.0f);
  std::uniform_int_distribution<int> level(0, 2);
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<T> x(s.n * s.h * s.w * s.c);
  for (auto& e : x) {
    const float pick = u(rng);
    float v = pick < 0.35f   ? normal(rng)
              : pick < 0.65f ? static_cast<float>(level(rng))
              : pick < 0.85f ? (u(rng) < 0.5f ? 0.0f : -0.0f)
              : pick < 0.95f ? std::max(0.0f, normal(rng))
              : pick < 0.97f ? std::numeric_limits<float>::quiet_NaN()
              : pick < 0.99f ? -inf
                             : inf;
    e = of<T>(v);
  }
  std::uniform_int_distribution<int64_t> image(0, s.n - 1), channel(0, s.c - 1);
  const int64_t n = image(rng), c = channel(rng);
  for (int64_t i = 0; i < s.h * s.w; ++i) x[(n * s.h * s.w + i) * s.c + c] = of<T>(-inf);
  if (s.h >= 4 && s.w >= 4) {
    const int64_t n2 = image(rng), c2 = channel(rng);
    for (int64_t iy = 1; iy < 3; ++iy) {
      for (int64_t ix = 1; ix < 4; ++ix) x[((n2 * s.h + iy) * s.w + ix) * s.c + c2] = of<T>(NAN);
    }
  }
  return x;
}

template <typename T>
std::vector<T> random_gradient(int64_t size, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<T> g(size);
  for (auto& e : g) e = of<T>(normal(rng));
  if (size > 3) g[size / 3] = of<T>(NAN);  // a NaN gradient reaches exactly the input its output points at
  return g;
}

// ---- one case -------------------------------------------------------------------------------------------------------

struct Variant {
  bool misalign = false;
  bool unrolled = true;  // false: the element-by-element paths on a shape the unrolled ones take
  int blocks = 0;        // a grid this small (0: the plan's), so that each thread loops over several items
  bool eager = false;    // PoolPlan::gradients_with_positions: the backward's gradients loaded with the positions
  bool by_blocks = true;  // PoolPlan::two_by_two where the plan takes it; false: a thread per input there too
};

template <typename T>
void run_case(const PoolShape& s, const Variant& variant, std::mt19937& rng) {
  ASSERT_EQ(pool_unsupported_reason(s), "");
  PoolPlan p = make_pool_plan(s, sizeof(T), !variant.misalign);
  if (!variant.unrolled) p.small_window = p.few_covers = p.two_by_two = false;
  if (!variant.by_blocks) p.two_by_two = false;
  if (variant.blocks > 0) p.forward_blocks = p.backward_blocks = variant.blocks;
  p.gradients_with_positions = variant.eager;
  const std::string what = std::string(dtype<T>()) + " [" + std::to_string(s.n) + "," + std::to_string(s.c) + "," +
                           std::to_string(s.h) + "," + std::to_string(s.w) + "] k" + std::to_string(s.kh) + "x" +
                           std::to_string(s.kw) + " s" + std::to_string(s.sh) + "x" + std::to_string(s.sw) + " p" +
                           std::to_string(s.ph) + "x" + std::to_string(s.pw) + " vec " + std::to_string(p.vec) +
                           (p.small_window ? " small" : "") + (p.few_covers ? " few" : "") +
                           (p.few_covers && p.gradients_with_positions ? " eager" : "") + (p.two_by_two ? " 2x2" : "") +
                           " blocks " + std::to_string(p.forward_blocks) + "/" + std::to_string(p.backward_blocks);
  SCOPED_TRACE(what);
  const int64_t inputs = s.n * s.c * s.h * s.w, outputs = s.n * s.c * p.oh * p.ow;
  const std::vector<T> x_values = random_input<T>(s, rng), dy_values = random_gradient<T>(outputs, rng);
  const T poison = of<T>(777.0f);
  Buffer<T> x(inputs, variant.misalign, poison), y(outputs, variant.misalign, poison),
      dy(outputs, variant.misalign, poison), dx(inputs, variant.misalign, poison);
  Buffer<uint8_t> positions(outputs, false, 0xee);
  std::copy(x_values.begin(), x_values.end(), x.data);
  std::copy(dy_values.begin(), dy_values.end(), dy.data);
  if (p.vec > 1) {
    constexpr int kWide = 16 / sizeof(T);
    emulate_forward<T, kWide>(p, x.data, y.data, positions.data);
    emulate_backward<T, kWide>(p, dy.data, positions.data, dx.data);
  } else {
    emulate_forward<T, 1>(p, x.data, y.data, positions.data);
    emulate_backward<T, 1>(p, dy.data, positions.data, dx.data);
  }
  const Reference ref = reference(s, p.oh, p.ow, x_values, dy_values);
  int64_t wrong_y = 0, wrong_at = 0, wrong_dx = 0, off_dx64 = 0;
  for (int64_t o = 0; o < outputs; ++o) {
    wrong_y += !same(value(y.data[o]), ref.y[o]);
    wrong_at += positions.data[o] != ref.at[o];
  }
  // dx: the same float sums in the same order, rounded once to T: equal to the reference. Against double: a float
  // sum of at most 9 terms here (3x3 stride 1, 5x5 stride 2) within 9 float roundings of their magnitudes, then T's
  // own rounding (half a unit in the last place), then half's smallest subnormal.
  const double half_ulp = std::is_same_v<T, float> ? 6e-8 : std::is_same_v<T, __half> ? 4.9e-4 : 3.9e-3;
  for (int64_t i = 0; i < inputs; ++i) {
    const float got = value(dx.data[i]);
    wrong_dx += !same(got, value(of<T>(ref.dx[i])));
    const double want = ref.dx64[i], tol = (9 * 6e-8 + half_ulp) * ref.abs64[i] + 6e-8;
    if (!std::isnan(want) && !(std::abs(got - want) <= tol)) ++off_dx64;
  }
  EXPECT_EQ(wrong_y, 0) << "outputs unlike ATen's max (or not written)";
  EXPECT_EQ(wrong_at, 0) << "positions unlike ATen's index (or not written)";
  EXPECT_EQ(wrong_dx, 0) << "input gradients unlike ATen's float sums (or not written)";
  EXPECT_EQ(off_dx64, 0) << "input gradients off the float64 sums";
  // Nothing outside the tensors written: the poison after the last element is intact.
  EXPECT_EQ(positions.data[outputs], 0xee);
  EXPECT_EQ(value(y.data[outputs]), value(poison));
  EXPECT_EQ(value(dx.data[inputs]), value(poison));
}

// ResNet's stem and odd ones: H and W odd and even, C no multiple of 8 (and of 4), kernels 1 to 5, strides 1 to 3,
// padding 0 to 2, rectangular windows, stride over the kernel (inputs no window covers), H = W = 1.
const PoolShape kShapes[] = {
    {2, 64, 16, 16, 3, 3, 2, 2, 1, 1},    // the stem's window on a small image: every path vectorised
    {1, 64, 112, 112, 3, 3, 2, 2, 1, 1},  // the stem's own image
    {3, 24, 15, 13, 3, 3, 2, 2, 1, 1},    // H, W odd
    {2, 12, 9, 10, 3, 3, 2, 2, 1, 1},     // C = 12: scalar for 16-bit types, vectors of 4 floats
    {1, 7, 8, 7, 3, 3, 1, 1, 1, 1},       // C = 7, stride 1: three outputs cover an input each way
    {2, 16, 10, 9, 2, 2, 2, 2, 0, 0},     // kernel 2, stride 2: one output an input
    {2, 8, 7, 7, 2, 2, 1, 1, 1, 1},       // kernel 2, padding 1
    {1, 5, 11, 6, 3, 3, 2, 2, 0, 0},      // no padding, C = 5
    {2, 16, 9, 9, 2, 3, 1, 2, 1, 0},      // a rectangular window and strides
    {1, 8, 12, 11, 5, 5, 2, 2, 2, 2},     // a 5x5 window: the element-by-element paths
    {1, 3, 6, 6, 4, 4, 3, 3, 1, 1},       // 4x4 window, stride 3
    {1, 4, 10, 10, 2, 2, 3, 3, 0, 0},     // stride over the kernel: uncovered inputs get zero
    {1, 9, 5, 5, 1, 1, 2, 2, 0, 0},       // kernel 1
    {3, 16, 1, 1, 1, 1, 1, 1, 0, 0},      // H = W = 1
    {2, 8, 1, 1, 3, 3, 2, 2, 1, 1},       // H = W = 1 inside a padded 3x3 window
};

template <typename T>
void run_all() {
  std::mt19937 rng = rn50::test::test_rng();
  for (const PoolShape& s : kShapes) {
    run_case<T>(s, {}, rng);
    run_case<T>(s, {/*misalign=*/true}, rng);
    run_case<T>(s, {false, /*unrolled=*/false}, rng);
    run_case<T>(s, {false, true, /*blocks=*/2}, rng);
    run_case<T>(s, {false, true, 0, /*eager=*/true}, rng);
    run_case<T>(s, {/*misalign=*/true, true, 0, /*eager=*/true}, rng);  // the eager order on scalar loads
    run_case<T>(s, {false, true, /*blocks=*/2, /*eager=*/true}, rng);   // and looping over several items a thread
    if (make_pool_plan(s, sizeof(T), true).two_by_two) {  // the stem's windows a thread per input, as before
      run_case<T>(s, {false, true, 0, true, /*by_blocks=*/false}, rng);
      run_case<T>(s, {true, true, 0, true, /*by_blocks=*/false}, rng);
    }
  }
}

TEST(MaxPoolKernelsHost, FloatMatchesAtensRules) { run_all<float>(); }
TEST(MaxPoolKernelsHost, HalfMatchesAtensRules) { run_all<__half>(); }
TEST(MaxPoolKernelsHost, BFloat16MatchesAtensRules) { run_all<__nv_bfloat16>(); }

// The rules on hand-made windows, not through the reference: one image, one channel, a 3x3 input, 3x3 windows of
// stride 2 and padding 1 (2x2 outputs; output (0, 0) holds input rows 0-1 and columns 0-1, at positions 4, 5, 7, 8).
TEST(MaxPoolKernelsHost, TiesNanAndInfinityFollowAten) {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  const PoolShape s{1, 1, 3, 3, 3, 3, 2, 2, 1, 1};
  struct Window {
    std::vector<float> x;  // the 3x3 input, row-major
    int position;          // output (0, 0)'s
    float y;
  };
  const Window windows[] = {
      {{1, 1, 0, 1, 1, 0, 0, 0, 0}, 4, 1},                 // equal maxima: the first in row-major order
      {{0, -0.0f, 0, -0.0f, 0, 0, 0, 0, 0}, 4, 0},         // zeros of both signs are equal
      {{1, nan, 0, 5, nan, 0, 0, 0, 0}, 8, nan},           // the last NaN wins over larger values and earlier NaNs
      {{-inf, -inf, 7, -inf, -inf, 7, 7, 7, 7}, 4, -inf},  // nothing but -inf: its first element inside the input
      {{-inf, -inf, 0, 3, inf, 0, 0, 0, 0}, 8, inf},       // +inf is a value like any other
  };
  for (const Window& win : windows) {
    for (const bool unrolled : {true, false}) {
      SCOPED_TRACE(::testing::Message() << "expected position " << win.position << (unrolled ? " unrolled" : ""));
      PoolPlan p = make_pool_plan(s, sizeof(float), true);
      ASSERT_EQ(p.oh, 2);
      ASSERT_EQ(p.ow, 2);
      if (!unrolled) p.small_window = p.few_covers = false;
      std::vector<float> y(4, 777.0f), dx(9, 777.0f);
      std::vector<uint8_t> positions(4, 0xee);
      emulate_forward<float, 1>(p, win.x.data(), y.data(), positions.data());
      EXPECT_EQ(positions[0], win.position);
      EXPECT_TRUE(same(y[0], win.y)) << y[0];
      // Output (0, 0)'s gradient alone lands on the input at its position: (position / 3 - 1, position % 3 - 1).
      const std::vector<float> dy = {1.0f, 0.0f, 0.0f, 0.0f};
      emulate_backward<float, 1>(p, dy.data(), positions.data(), dx.data());
      std::vector<float> want(9, 0.0f);
      want[(win.position / 3 - 1) * 3 + win.position % 3 - 1] = 1.0f;
      EXPECT_EQ(dx, want);
    }
  }
}

TEST(MaxPoolKernelsHost, BackwardSumsEveryOutputPointingAtAnInput) {
  // 2x2 windows of stride 1 and padding 1 on a constant 2x2 image: 3x3 outputs, each window's max its first element
  // inside the input, so input (0, 0) takes outputs (0, 0), (0, 1), (1, 0), (1, 1); input (0, 1) takes (0, 2) and
  // (1, 2); (1, 0) takes (2, 0) and (2, 1); (1, 1) takes (2, 2).
  const PoolShape s{1, 1, 2, 2, 2, 2, 1, 1, 1, 1};
  const std::vector<float> x(4, 2.0f), dy = {1, 2, 4, 8, 16, 32, 64, 128, 256};
  for (const bool unrolled : {true, false}) {
    PoolPlan p = make_pool_plan(s, sizeof(float), true);
    ASSERT_TRUE(p.few_covers);
    if (!unrolled) p.small_window = p.few_covers = false;
    std::vector<float> y(9, 777.0f), dx(4, 777.0f);
    std::vector<uint8_t> positions(9, 0xee);
    emulate_forward<float, 1>(p, x.data(), y.data(), positions.data());
    emulate_backward<float, 1>(p, dy.data(), positions.data(), dx.data());
    EXPECT_EQ(dx, (std::vector<float>{1 + 2 + 8 + 16, 4 + 32, 64 + 128, 256})) << unrolled;
  }
}

// ---- BatchNorm+ReLU in the forward (bn_relu_max_pool_forward) -------------------------------------------------------

template <typename T, int VEC>
void emulate_norm_forward(const PoolPlan& p, const T* x, T* y, uint8_t* positions, const PoolNorm& norm, T* x_at) {
  const int64_t threads = static_cast<int64_t>(p.forward_blocks) * kThreads;
  for (int64_t t = 0; t < threads; ++t) {
    if (p.small_window) {
      pool_impl::forward_thread<T, VEC, true, true>(p, t, threads, x, y, positions, norm, x_at);
    } else {
      pool_impl::forward_thread<T, VEC, false, true>(p, t, threads, x, y, positions, norm, x_at);
    }
  }
}

// The fused forward against the two ops apart on the same code: BatchNorm+ReLU by batch_norm_kernels' normalise pass
// (emulated), then the plain pool. The values must be equal bit for bit; the positions where
// the max is above zero, kNoGradient elsewhere; and the pool's backward from the fused positions must be the plain
// backward masked by ReLU (y > 0 of the normalised element), in the same float sums.
struct Cases {
  int64_t passing = 0, blocked = 0;  // outputs whose max is above zero, and the others
};

// The input element (channels-last index) at window position `at` of output element `o` (channels-last index).
int64_t input_of(const PoolShape& s, const PoolPlan& p, int64_t o, int at) {
  const int64_t c = o % s.c, pixel = o / s.c, ox = pixel % p.ow, oy = pixel / p.ow % p.oh, n = pixel / p.ow / p.oh;
  const int64_t iy = oy * s.sh - s.ph + at / s.kw, ix = ox * s.sw - s.pw + at % s.kw;
  return ((n * s.h + iy) * s.w + ix) * s.c + c;
}

template <typename T>
void run_norm_case(const PoolShape& s, const Variant& variant, std::mt19937& rng, Cases& cases) {
  PoolPlan p = make_pool_plan(s, sizeof(T), !variant.misalign);
  if (!variant.unrolled) p.small_window = p.few_covers = false;
  if (variant.blocks > 0) p.forward_blocks = p.backward_blocks = variant.blocks;
  SCOPED_TRACE(::testing::Message() << dtype<T>() << " [" << s.n << "," << s.c << "," << s.h << "," << s.w << "] k"
                                    << s.kh << "x" << s.kw << " s" << s.sh << " p" << s.ph << " vec " << p.vec
                                    << (p.small_window ? " small" : "") << " blocks " << p.forward_blocks);
  const int64_t inputs = s.n * s.c * s.h * s.w, outputs = s.n * s.c * p.oh * p.ow;
  const std::vector<T> x_values = random_input<T>(s, rng), dy_values = random_gradient<T>(outputs, rng);
  // Statistics and affine parameters of either sign, so that ReLU zeroes a share of every channel, and a channel
  // with weight 0 (every element equal: ties everywhere).
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> spread(0.2f, 3.0f);
  std::vector<float> weight(s.c), bias(s.c), mean(s.c), invstd(s.c);
  for (int64_t c = 0; c < s.c; ++c) {
    weight[c] = c == 1 ? 0.0f : normal(rng);
    bias[c] = 0.5f * normal(rng);
    mean[c] = 0.3f * normal(rng);
    invstd[c] = spread(rng);
  }
  // The normalised tensor the two ops apart would write: batch_norm_forward's normalise pass itself (emulated, with
  // these statistics), so that the comparison is with that kernel's rounding, ReLU and NaN rules.
  std::vector<T> z(inputs);
  {
    ForwardArgs<T> fa;
    fa.x = x_values.data();
    fa.y = z.data();
    fa.weight = weight.data();
    fa.bias = bias.data();
    fa.mean = mean.data();
    fa.invstd = invstd.data();
    fa.relu = true;
    fa.batch_stats = false;
    emulation::emulate_forward<T, 1>(impl::make_plan_for(s.n * s.h * s.w, s.c, sizeof(T), false, 8), fa);
  }
  const T poison = of<T>(777.0f);
  Buffer<T> x(inputs, variant.misalign, poison), zb(inputs, variant.misalign, poison),
      y(outputs, variant.misalign, poison), y_ref(outputs, variant.misalign, poison),
      dy(outputs, variant.misalign, poison), dx(inputs, variant.misalign, poison),
      dx_ref(inputs, variant.misalign, poison), x_at(outputs, variant.misalign, poison);
  Buffer<uint8_t> positions(outputs, false, 0xee), positions_ref(outputs, false, 0xee);
  std::copy(x_values.begin(), x_values.end(), x.data);
  std::copy(z.begin(), z.end(), zb.data);
  std::copy(dy_values.begin(), dy_values.end(), dy.data);
  const PoolNorm norm{weight.data(), bias.data(), mean.data(), invstd.data()};
  if (p.vec > 1) {
    constexpr int kWide = 16 / sizeof(T);
    emulate_norm_forward<T, kWide>(p, x.data, y.data, positions.data, norm, x_at.data);
    emulate_forward<T, kWide>(p, zb.data, y_ref.data, positions_ref.data);
    emulate_backward<T, kWide>(p, dy.data, positions.data, dx.data);
    emulate_backward<T, kWide>(p, dy.data, positions_ref.data, dx_ref.data);
  } else {
    emulate_norm_forward<T, 1>(p, x.data, y.data, positions.data, norm, x_at.data);
    emulate_forward<T, 1>(p, zb.data, y_ref.data, positions_ref.data);
    emulate_backward<T, 1>(p, dy.data, positions.data, dx.data);
    emulate_backward<T, 1>(p, dy.data, positions_ref.data, dx_ref.data);
  }
  int64_t wrong_y = 0, wrong_at = 0, wrong_dx = 0, wrong_x_at = 0;
  for (int64_t o = 0; o < outputs; ++o) {
    const float want = value(y_ref.data[o]);
    wrong_y += !same(value(y.data[o]), want);
    const int at = want > 0.0f ? positions_ref.data[o] : kNoGradient;
    wrong_at += positions.data[o] != at;
    (want > 0.0f ? cases.passing : cases.blocked) += 1;
    if (at != kNoGradient) wrong_x_at += !same(value(x_at.data[o]), value(x_values[input_of(s, p, o, at)]));
  }
  for (int64_t i = 0; i < inputs; ++i) {
    const float want = value(z[i]) > 0.0f ? value(dx_ref.data[i]) : 0.0f;
    wrong_dx += !same(value(dx.data[i]), want);
  }
  EXPECT_EQ(wrong_y, 0) << "outputs unlike the pool of the normalised tensor";
  EXPECT_EQ(wrong_at, 0) << "positions unlike the plain pool's (or not kNoGradient where the max is not above zero)";
  EXPECT_EQ(wrong_x_at, 0) << "x_at unlike x at the max's position";
  EXPECT_EQ(value(x_at.data[outputs]), value(poison));
  EXPECT_EQ(wrong_dx, 0) << "input gradients unlike the plain backward masked by ReLU";
  EXPECT_EQ(positions.data[outputs], 0xee);
  EXPECT_EQ(value(y.data[outputs]), value(poison));
}

template <typename T>
void run_all_norm() {
  std::mt19937 rng = rn50::test::test_rng();
  Cases cases;
  for (const PoolShape& s : kShapes) {
    run_norm_case<T>(s, {}, rng, cases);
    run_norm_case<T>(s, {/*misalign=*/true}, rng, cases);
    run_norm_case<T>(s, {false, /*unrolled=*/false}, rng, cases);
    run_norm_case<T>(s, {false, true, /*blocks=*/2}, rng, cases);
  }
  // The inputs reach both cases, each many times.
  EXPECT_GT(cases.passing, 1000);
  EXPECT_GT(cases.blocked, 1000);
  std::printf("[ cases    ] %s: %lld outputs above zero, %lld not\n", dtype<T>(),
              static_cast<long long>(cases.passing), static_cast<long long>(cases.blocked));
}

TEST(MaxPoolKernelsHost, NormalisedFloatPoolEqualsTheOpsApart) { run_all_norm<float>(); }
TEST(MaxPoolKernelsHost, NormalisedHalfPoolEqualsTheOpsApart) { run_all_norm<__half>(); }
TEST(MaxPoolKernelsHost, NormalisedBFloat16PoolEqualsTheOpsApart) { run_all_norm<__nv_bfloat16>(); }

// ---- BatchNorm's backward from the pool's gradient (batch_norm_backward_pooled) -----------------------------------

constexpr double kFloatStep = 0x1p-24;  // float's unit roundoff

// T's relative rounding step (2^-mantissa bits).
template <typename T>
double rounding() {
  if constexpr (std::is_same_v<T, float>) return std::ldexp(1.0, -23);
  if constexpr (std::is_same_v<T, __half>) return std::ldexp(1.0, -10);
  return std::ldexp(1.0, -7);
}

// T's step below its smallest normal value (half: 2^-24, where float16's subnormals start at 6.1e-5).
template <typename T>
double subnormal() {
  if constexpr (std::is_same_v<T, float>) return std::ldexp(1.0, -149);
  if constexpr (std::is_same_v<T, __half>) return std::ldexp(1.0, -24);
  return std::ldexp(1.0, -133);
}

// The fused path (dweight and dbias summed over the pool's outputs at x_at, dx gathering each input's gradient) against
// a float64 reference written plainly from dy, the positions and x. Tolerances, from the sums of the terms'
// magnitudes: dweight and dbias within 1e-5 of theirs (float sums); dx within two of T's steps of |weight * invstd *
// g| and of |dx| (the gathered gradient and dx are rounded to T), plus a float step per gathered term times |weight *
// invstd| and their magnitudes' sum (g is summed in float, and the outputs pointing at one input can cancel), 2e-5 of
// its mean terms' magnitudes and one subnormal step of T. The two passes apart (the pool's backward into an input-sized
// gradient rounded to T, then BatchNorm's backward, as bn_relu_max_pool2d ran them before) must meet the reference
// within T's step too: a check of the reference.
template <typename T>
void run_pooled_backward_case(const PoolShape& s, bool misalign, std::mt19937& rng) {
  const PoolPlan pool = make_pool_plan(s, sizeof(T), !misalign);
  const int64_t rows = s.n * s.h * s.w, inputs = rows * s.c, outputs = s.n * s.c * pool.oh * pool.ow;
  const Plan plan = impl::make_plan_for(rows, s.c, sizeof(T), !misalign, 8);
  const Plan po = impl::pooled_reduce_plan(plan, s.n * pool.oh * pool.ow);
  ASSERT_EQ(plan.vec, pool.vec);
  ASSERT_LE(po.workspace_bytes, plan.workspace_bytes);
  SCOPED_TRACE(::testing::Message() << dtype<T>() << " [" << s.n << "," << s.c << "," << s.h << "," << s.w << "] k"
                                    << s.kh << "x" << s.kw << " s" << s.sh << " p" << s.ph << " vec " << plan.vec);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> spread(0.2f, 3.0f);
  std::vector<float> weight(s.c), bias(s.c), mean(s.c), invstd(s.c);
  for (int64_t c = 0; c < s.c; ++c) {
    weight[c] = normal(rng);
    bias[c] = 0.5f * normal(rng);
    mean[c] = 0.3f * normal(rng);
    invstd[c] = spread(rng);
  }
  const T poison = of<T>(777.0f);
  Buffer<T> x(inputs, misalign, poison), y(outputs, misalign, poison), dy(outputs, misalign, poison),
      x_at(outputs, misalign, poison), g(inputs, misalign, poison), dx_apart(inputs, misalign, poison),
      dx_fused(inputs, misalign, poison), dx_blocks(inputs, misalign, poison);
  Buffer<uint8_t> positions(outputs, false, 0xee);
  for (int64_t i = 0; i < inputs; ++i) x.data[i] = of<T>(normal(rng));
  const std::vector<T> dy_values = random_gradient<T>(outputs, rng);
  std::copy(dy_values.begin(), dy_values.end(), dy.data);
  std::vector<float> dw_apart(s.c), db_apart(s.c), dw_fused(s.c), db_fused(s.c);
  const PoolNorm norm{weight.data(), bias.data(), mean.data(), invstd.data()};
  BackwardArgs<T> a;
  a.x = x.data;
  a.weight = weight.data();
  a.bias = bias.data();
  a.mean = mean.data();
  a.invstd = invstd.data();
  a.relu = false;
  a.batch_stats = true;
  BackwardArgs<T> b = a;
  a.dy = g.data;
  a.dx = dx_apart.data;
  a.dweight = dw_apart.data();
  a.dbias = db_apart.data();
  b.dx = dx_fused.data;
  b.dweight = dw_fused.data();
  b.dbias = db_fused.data();
  const auto run = [&](auto vec) {
    constexpr int VEC = decltype(vec)::value;
    emulate_norm_forward<T, VEC>(pool, x.data, y.data, positions.data, norm, x_at.data);
    emulate_backward<T, VEC>(pool, dy.data, positions.data, g.data);
    emulation::emulate_backward<T, VEC>(plan, a);
    const pool_impl::PoolMaskedGrad<T, VEC> masked{dy.data, positions.data, s.c};
    if (pool.few_covers) {
      emulation::emulate_backward_from<T, VEC>(plan, po, b, masked, x_at.data,
                                               pool_impl::PoolGatherGrad<T, VEC, true>{pool, dy.data, positions.data});
    } else {
      emulation::emulate_backward_from<T, VEC>(plan, po, b, masked, x_at.data,
                                               pool_impl::PoolGatherGrad<T, VEC, false>{pool, dy.data, positions.data});
    }
    if (pool.two_by_two) {  // dx by output blocks, from the coefficients the passes above made, on a small grid
      const impl::DxCoefficients co{b.weight, b.mean, b.invstd, b.dweight, b.dbias, true, b.bias};
      const int64_t threads = 3 * kThreads;
      for (int64_t t = 0; t < threads; ++t) {
        pool_impl::dx_block_thread<T, VEC>(pool, t, threads, dy.data, positions.data, x.data, co, dx_blocks.data);
      }
    }
  };
  if (plan.vec > 1) {
    run(std::integral_constant<int, 16 / sizeof(T)>{});
  } else {
    run(std::integral_constant<int, 1>{});
  }
  // The reference: each output's gradient where its position passes one, at x of that position.
  std::vector<double> db64(s.c, 0.0), dw64(s.c, 0.0), db_abs(s.c, 0.0), dw_abs(s.c, 0.0), g64(inputs, 0.0),
      g_abs(inputs, 0.0);
  std::vector<int> covers(inputs, 0);
  const auto xhat_of = [&](int64_t i) {
    return (static_cast<double>(value(x.data[i])) - mean[i % s.c]) * invstd[i % s.c];
  };
  for (int64_t o = 0; o < outputs; ++o) {
    if (positions.data[o] == kNoGradient) continue;
    const int64_t c = o % s.c, i = input_of(s, pool, o, positions.data[o]);
    const double gv = value(dy.data[o]);
    const double xhat = xhat_of(i);
    g64[i] += gv;
    g_abs[i] += std::fabs(gv);
    ++covers[i];
    db64[c] += gv;
    dw64[c] += gv * xhat;
    db_abs[c] += std::fabs(gv);
    dw_abs[c] += std::fabs(gv * xhat);
  }
  const auto near = [](double got, double want, double tolerance) {
    return std::isnan(want) ? std::isnan(got) : std::fabs(got - want) <= tolerance;
  };
  int64_t wrong_dw = 0, wrong_db = 0, wrong_apart = 0, wrong_dx = 0;
  for (int64_t c = 0; c < s.c; ++c) {
    wrong_db += !near(db_fused[c], db64[c], 1e-5 * db_abs[c] + 1e-30);
    wrong_dw += !near(dw_fused[c], dw64[c], 1e-5 * dw_abs[c] + 1e-30);
    const double step = rounding<T>() + 1e-5;
    wrong_apart +=
        !near(db_apart[c], db64[c], step * db_abs[c] + 1e-30) + !near(dw_apart[c], dw64[c], step * dw_abs[c] + 1e-30);
  }
  const double m = static_cast<double>(rows);
  for (int64_t i = 0; i < inputs; ++i) {
    const int64_t c = i % s.c;
    const double scale = static_cast<double>(weight[c]) * invstd[c], xhat = xhat_of(i);
    const double want = scale * (g64[i] - db64[c] / m - xhat * dw64[c] / m);
    const double tolerance = 2.0 * rounding<T>() * (std::fabs(scale * g64[i]) + std::fabs(want)) +
                             covers[i] * kFloatStep * std::fabs(scale) * g_abs[i] +
                             2e-5 * std::fabs(scale) * (db_abs[c] + std::fabs(xhat) * dw_abs[c]) / m + subnormal<T>();
    wrong_dx += !near(value(dx_fused.data[i]), want, tolerance);
  }
  EXPECT_EQ(wrong_db, 0) << "dbias off the float64 reference";
  EXPECT_EQ(wrong_dw, 0) << "dweight off the float64 reference";
  EXPECT_EQ(wrong_apart, 0) << "the passes apart off the float64 reference: the reference is wrong";
  EXPECT_EQ(wrong_dx, 0) << "dx off the float64 reference";
  EXPECT_EQ(value(dx_fused.data[inputs]), value(poison));
  if (pool.two_by_two) {  // the same sums and the same dx arithmetic: equal bit for bit, every element written
    int64_t unlike = 0;
    for (int64_t i = 0; i < inputs; ++i) unlike += std::memcmp(&dx_blocks.data[i], &dx_fused.data[i], sizeof(T)) != 0;
    EXPECT_EQ(unlike, 0) << "dx by output blocks unlike dx a thread per input";
    EXPECT_EQ(value(dx_blocks.data[inputs]), value(poison));
  }
}

template <typename T>
void run_all_pooled_backward() {
  std::mt19937 rng = rn50::test::test_rng();
  for (const PoolShape& s : kShapes) {
    run_pooled_backward_case<T>(s, false, rng);
    run_pooled_backward_case<T>(s, true, rng);
  }
}

TEST(MaxPoolKernelsHost, FloatBatchNormBackwardFromThePoolMatchesFloat64AndThePassesApart) {
  run_all_pooled_backward<float>();
}
TEST(MaxPoolKernelsHost, HalfBatchNormBackwardFromThePoolMatchesFloat64AndThePassesApart) {
  run_all_pooled_backward<__half>();
}
TEST(MaxPoolKernelsHost, BFloat16BatchNormBackwardFromThePoolMatchesFloat64AndThePassesApart) {
  run_all_pooled_backward<__nv_bfloat16>();
}

TEST(MaxPoolKernelsHost, FastDivisionIsExact) {
  std::mt19937 rng = rn50::test::test_rng();
  std::uniform_int_distribution<int32_t> any(0, std::numeric_limits<int32_t>::max());
  std::vector<int32_t> divisors = {1,
                                   2,
                                   3,
                                   5,
                                   7,
                                   8,
                                   56,
                                   112,
                                   255,
                                   256,
                                   257,
                                   12544,
                                   65535,
                                   65537,
                                   (1 << 30) - 1,
                                   1 << 30,
                                   (1 << 30) + 1,
                                   std::numeric_limits<int32_t>::max()};
  for (int i = 0; i < 200; ++i) divisors.push_back(std::max(1, any(rng) >> (i % 31)));
  int64_t wrong = 0;
  for (const int32_t d : divisors) {
    const FastDiv f = make_fast_div(d);
    std::vector<int32_t> numerators = {
        0, 1, d - 1, d, std::numeric_limits<int32_t>::max(), std::numeric_limits<int32_t>::max() - 1};
    if (d < std::numeric_limits<int32_t>::max() / 3) numerators.insert(numerators.end(), {2 * d - 1, 2 * d, 3 * d + 1});
    for (int i = 0; i < 2000; ++i) numerators.push_back(any(rng) >> (i % 31));
    for (const int32_t n : numerators) {
      int rem = -1;
      const int q = pool_impl::divmod(f, n, rem);
      if (q != n / d || rem != n % d) {
        if (++wrong < 5) ADD_FAILURE() << n << " / " << d << ": " << q << " rem " << rem;
      }
    }
  }
  EXPECT_EQ(wrong, 0);
}

TEST(MaxPoolKernelsHost, UnsupportedShapesSayWhy) {
  const PoolShape stem{256, 64, 112, 112, 3, 3, 2, 2, 1, 1};
  EXPECT_EQ(pool_unsupported_reason(stem), "");
  PoolShape s = stem;
  s.ph = 2;  // torch: padding at most half the kernel
  EXPECT_EQ(pool_unsupported_reason(s), "padding over half the kernel");
  s = stem;
  s.sw = 0;
  EXPECT_EQ(pool_unsupported_reason(s), "an invalid window");
  s = stem;
  s.kh = s.kw = 17;  // 289 positions
  EXPECT_EQ(pool_unsupported_reason(s), "a window of more than 256 elements (positions are one byte)");
  s.kh = 16;  // 16 x 17 = 272
  EXPECT_NE(pool_unsupported_reason(s), "");
  s.kw = 16;  // exactly 256: positions 0-255
  EXPECT_EQ(pool_unsupported_reason(s), "");
  s = stem;
  s.h = 1;  // 1 + 2 - 3 = 0: one output row; with no padding none
  EXPECT_EQ(pool_unsupported_reason(s), "");
  s.ph = 0;
  EXPECT_EQ(pool_unsupported_reason(s), "an empty input or output");
  s = stem;
  s.n = 4096;  // 4096 * 64 * 112 * 112 > 2^31
  EXPECT_EQ(pool_unsupported_reason(s), "2^31 elements or more");
}

TEST(MaxPoolKernelsHost, PlanOfTheStem) {
  const PoolShape stem{256, 64, 112, 112, 3, 3, 2, 2, 1, 1};
  for (const int bytes : {2, 4}) {
    const PoolPlan p = make_pool_plan(stem, bytes, true);
    EXPECT_EQ(p.oh, 56);
    EXPECT_EQ(p.ow, 56);
    EXPECT_EQ(p.vec, 16 / bytes);
    EXPECT_TRUE(p.small_window);
    EXPECT_TRUE(p.few_covers);
    EXPECT_TRUE(p.two_by_two);  // the backward by output blocks
    EXPECT_EQ(p.forward_items, 256 * 56 * 56 * 64 / p.vec);
    EXPECT_EQ(p.backward_items, 256 * 112 * 112 * 64 / p.vec);
    EXPECT_EQ(p.forward_blocks,
              std::min<int64_t>(cuda::launch::kMaxBlocks, (p.forward_items + kThreads - 1) / kThreads));
    EXPECT_EQ(make_pool_plan(stem, bytes, false).vec, 1);
  }
  PoolShape odd = stem;
  odd.c = 12;
  EXPECT_EQ(make_pool_plan(odd, 2, true).vec, 1);
  EXPECT_EQ(make_pool_plan(odd, 4, true).vec, 4);
  EXPECT_TRUE(make_pool_plan(odd, 2, true).two_by_two);  // any channels, scalar loads included
  odd.sh = 1;  // three outputs cover an input row
  EXPECT_FALSE(make_pool_plan(odd, 2, true).few_covers);
  EXPECT_FALSE(make_pool_plan(odd, 2, true).two_by_two);
  for (const PoolShape& other : {PoolShape{1, 8, 9, 9, 3, 3, 2, 2, 0, 0}, PoolShape{1, 8, 9, 9, 2, 2, 2, 2, 1, 1},
                                 PoolShape{1, 8, 9, 9, 3, 2, 2, 2, 1, 1}, PoolShape{1, 8, 9, 9, 3, 3, 2, 1, 1, 1}}) {
    EXPECT_FALSE(make_pool_plan(other, 2, true).two_by_two);  // other windows, strides or padding gather per input
  }
}

// The stem's BatchNorm backward from its pool on a 132-SM GPU (an H100): dx's gathering pass one wave of 2 blocks an SM
// (impl::kGatherBlocksPerSm), the reduction over the pool's outputs on the input plan's tiling and blocks.
TEST(MaxPoolKernelsHost, PooledBackwardPlansOfTheStem) {
  const Plan p = impl::make_plan_for(256 * 112 * 112, 64, 2, true, 132);
  EXPECT_EQ(p.tiles, 1);
  EXPECT_EQ(p.elementwise_blocks, 132 * impl::kBlocksPerSm);
  const Plan pd = impl::pooled_dx_plan(p);
  EXPECT_EQ(pd.elementwise_blocks, 132 * impl::kGatherBlocksPerSm);
  EXPECT_EQ(pd.rows, p.rows);
  const Plan po = impl::pooled_reduce_plan(p, 256 * 56 * 56);
  EXPECT_EQ(po.rows, 256 * 56 * 56);
  EXPECT_EQ(po.reduce_blocks, p.reduce_blocks);
  EXPECT_EQ(po.lanes, p.lanes);
  EXPECT_EQ(po.workspace_bytes, p.workspace_bytes);
  // A pool with more outputs than inputs (kernel 2, padding 1, stride 1) keeps within the input plan's workspace.
  const Plan small = impl::make_plan_for(7 * 7, 8, 4, true, 132);
  EXPECT_LE(impl::pooled_reduce_plan(small, 8 * 8).workspace_bytes, small.workspace_bytes);
  EXPECT_GE(impl::pooled_dx_plan(small).elementwise_blocks, 1);
}

}  // namespace
}  // namespace rn50::ops::kernels
