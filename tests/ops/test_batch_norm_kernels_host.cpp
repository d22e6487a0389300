// tests/ops/test_batch_norm_kernels_host.cpp: rn50's BatchNorm kernels emulated on the host (every block and thread
// of each launch, running the same per-thread code as the GPU) against a float64 reference, on fresh random inputs.
// Needs the CUDA headers (half and bfloat16 types), no GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "ops/batch_norm_kernels_impl.cuh"
#include "tests/ops/batch_norm_emulation.h"
#include "tests/support/seeded_rng.h"

namespace rn50::ops::kernels {
namespace {

using impl::Idx;
using namespace emulation;  // NOLINT: the launches, thread by thread

// ---- data and the float64 reference -------------------------------------------------------------------------------

template <typename T>
T to_t(float v) {
  if constexpr (std::is_same_v<T, float>) {
    return v;
  } else if constexpr (std::is_same_v<T, __half>) {
    return __float2half_rn(v);
  } else {
    return __float2bfloat16_rn(v);
  }
}

template <typename T>
double to_d(T v) {
  return static_cast<double>(impl::to_float(v));
}

template <typename T>
const char* type_name() {
  if constexpr (std::is_same_v<T, float>) return "float";
  if constexpr (std::is_same_v<T, __half>) return "half";
  return "bfloat16";
}

// One unit in the last place of T at 1.0, the yardstick of the output tolerances.
template <typename T>
double ulp() {
  if constexpr (std::is_same_v<T, float>) return 1.2e-7;
  if constexpr (std::is_same_v<T, __half>) return 9.8e-4;
  return 7.8e-3;
}

// The smallest subnormal, twice the absolute rounding error of tiny values (half's exponent range is narrow).
template <typename T>
double tiny() {
  if constexpr (std::is_same_v<T, __half>) return 6e-8;
  return 1e-40;
}

// 16-byte aligned storage with an optional offset of one element, to exercise the scalar path on misaligned data.
template <typename T>
struct Buffer {
  std::vector<T> storage;
  T* data = nullptr;
  Buffer(size_t n, bool misalign) : storage(n + 16 / sizeof(T) + 1) {
    const auto base = reinterpret_cast<uintptr_t>(storage.data());
    const uintptr_t aligned = (base + 15) / 16 * 16;
    data = reinterpret_cast<T*>(aligned) + (misalign ? 1 : 0);
  }
};

struct Case {
  int64_t rows, channels;
  bool misalign;
  int sm_count;
  double offset;  // added to x: a channel mean far from zero tests the shifted sums
};

// SiLU and its derivative in double, the references of the kernels' float ones.
double silu_ref(double z) { return z / (1.0 + std::exp(-z)); }
double silu_grad_ref(double z) {
  const double s = 1.0 / (1.0 + std::exp(-z));
  return s * (1.0 + z * (1.0 - s));
}

// The forward's ReLU bits (ForwardArgs::relu_bits) are bit k of byte i / 8 set exactly where y[i] > 0 (i = row * C +
// c0 + k). The backward again reading them, y withheld where dx does not read it: every output bit for bit the y
// run's. Then one bit of a positive output cleared: dbias must change, so the bits are what the reduction reads.
template <typename T>
void expect_relu_bits_match_y(const Plan& p, const BackwardArgs<T>& with_y, int64_t n, bool residual,
                              std::vector<uint8_t> bits) {
  int64_t positive = -1, wrong_bits = 0;
  for (int64_t i = 0; i < n; ++i) {
    const bool set = (bits[i / 8] >> (i % 8)) & 1U;
    wrong_bits += set != (to_d(with_y.y[i]) > 0);
    if (set && positive < 0 && std::abs(to_d(with_y.dy[i])) > 0.1) positive = i;
  }
  EXPECT_EQ(wrong_bits, 0) << "the forward's bits must mark exactly the positive outputs";
  const int64_t c = p.channels;
  Buffer<T> dx(n, false), dr(n, false);
  std::vector<float> dw(c), db(c);
  BackwardArgs<T> b = with_y;
  b.relu_bits = bits.data();
  b.y = residual ? nullptr : with_y.y;  // with a residual dx reads the stored g: y is not needed
  b.dx = dx.data;
  b.dresidual = with_y.dresidual != nullptr ? dr.data : nullptr;
  b.dweight = dw.data();
  b.dbias = db.data();
  emulate_backward<T, 8>(p, b);
  int64_t differ = 0;
  for (int64_t i = 0; i < n; ++i) {
    differ += std::memcmp(&dx.data[i], &with_y.dx[i], sizeof(T)) != 0;
    if (b.dresidual != nullptr) differ += std::memcmp(&dr.data[i], &with_y.dresidual[i], sizeof(T)) != 0;
  }
  for (int64_t k = 0; k < c; ++k) differ += dw[k] != with_y.dweight[k] || db[k] != with_y.dbias[k];
  EXPECT_EQ(differ, 0) << "relu_bits must give the y mask's results bit for bit";
  ASSERT_GE(positive, 0);
  bits[positive / 8] &= static_cast<uint8_t>(~(1U << (positive % 8)));
  emulate_backward<T, 8>(p, b);
  EXPECT_NE(db[positive % c], with_y.dbias[positive % c]) << "a cleared bit must mask its element";
}

// `silu`: BatchNorm+SiLU (no residual, relu false) instead of ReLU.
template <typename T>
void run_case(const Case& cs, bool residual, bool relu, bool training, std::mt19937& rng, bool silu = false) {
  const int64_t m = cs.rows, c = cs.channels, n = m * c;
  const Plan p = impl::make_plan_for(m, c, sizeof(T), !cs.misalign, cs.sm_count);
  const std::string what = std::string(type_name<T>()) + " rows " + std::to_string(m) + " C " + std::to_string(c) +
                           " vec " + std::to_string(p.vec) + " tiles " + std::to_string(p.tiles) + " blocks " +
                           std::to_string(p.reduce_blocks) + (residual ? " +residual" : "") + (relu ? " relu" : "") +
                           (silu ? " silu" : "") +
                           (training ? " train" : " eval");
  SCOPED_TRACE(what);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> uniform(0.5f, 1.5f);
  Buffer<T> x(n, cs.misalign), r(n, cs.misalign), y(n, cs.misalign), dy(n, cs.misalign), dx(n, cs.misalign),
      dr(n, cs.misalign);
  std::vector<float> w(c), b(c), rm(c), rv(c), mean(c), invstd(c), dw(c), db(c);
  std::vector<double> ch_scale(c), ch_shift(c);
  for (int64_t k = 0; k < c; ++k) {
    ch_scale[k] = uniform(rng) * (k % 3 + 1);
    ch_shift[k] = cs.offset + normal(rng);
    w[k] = normal(rng);
    b[k] = 0.3f * normal(rng);
    rm[k] = 0.1f * normal(rng);
    rv[k] = uniform(rng);
  }
  for (int64_t i = 0; i < n; ++i) {
    const int64_t k = i % c;
    x.data[i] = to_t<T>(static_cast<float>(ch_shift[k] + ch_scale[k] * normal(rng)));
    r.data[i] = to_t<T>(normal(rng));
    dy.data[i] = to_t<T>(normal(rng));
  }
  const std::vector<float> rm0 = rm, rv0 = rv;
  const double momentum = 0.1, eps = 1e-5;

  // Reference statistics from the T values, in double.
  std::vector<double> ref_mean(c, 0.0), ref_var(c, 0.0), ref_invstd(c);
  for (int64_t i = 0; i < n; ++i) ref_mean[i % c] += to_d(x.data[i]);
  for (int64_t k = 0; k < c; ++k) ref_mean[k] /= m;
  for (int64_t i = 0; i < n; ++i) ref_var[i % c] += std::pow(to_d(x.data[i]) - ref_mean[i % c], 2);
  for (int64_t k = 0; k < c; ++k) ref_var[k] /= m;
  if (training) {
    for (int64_t k = 0; k < c; ++k) ref_invstd[k] = 1.0 / std::sqrt(ref_var[k] + eps);
  } else {
    for (int64_t k = 0; k < c; ++k) {
      mean[k] = rm[k];
      invstd[k] = static_cast<float>(1.0 / std::sqrt(static_cast<double>(rv[k]) + eps));
      ref_mean[k] = mean[k];
      ref_invstd[k] = invstd[k];
    }
  }

  ForwardArgs<T> fa;
  fa.x = x.data;
  fa.residual = residual ? r.data : nullptr;
  fa.y = y.data;
  fa.weight = w.data();
  fa.bias = b.data();
  fa.running_mean = training ? rm.data() : nullptr;
  fa.running_var = training ? rv.data() : nullptr;
  fa.mean = mean.data();
  fa.invstd = invstd.data();
  fa.momentum = momentum;
  fa.eps = eps;
  fa.relu = relu;
  fa.silu = silu;
  fa.batch_stats = training;
  // ReLU's mask as bits where the kernels write them (a residual and ReLU, half and bfloat16, 16-byte vectors).
  const bool bits_case = sizeof(T) == 2 && relu && residual && p.vec == 8;
  std::vector<uint8_t> bits(bits_case ? static_cast<size_t>(n / 8) : 0, 0xAA);  // a pattern the forward must replace
  fa.relu_bits = bits_case ? bits.data() : nullptr;
  if (p.vec > 1) {
    emulate_forward<T, 16 / sizeof(T)>(p, fa);
  } else {
    emulate_forward<T, 1>(p, fa);
  }

  // Statistics: float sums of shifted values, combined in double, then stored as float: the mean within 1e-5 of the
  // spread plus its float rounding, invstd and the running variance within 1e-5 relative.
  double worst_mean = 0, worst_invstd = 0;
  for (int64_t k = 0; k < c; ++k) {
    const double spread = std::sqrt(ref_var[k] + eps);
    worst_mean =
        std::max(worst_mean, std::abs(mean[k] - ref_mean[k]) / (1e-5 * spread + 1.2e-7 * std::abs(ref_mean[k])));
    worst_invstd = std::max(worst_invstd, std::abs(invstd[k] - ref_invstd[k]) / (1e-5 * ref_invstd[k]));
    if (training) {
      const double want_rm = (1 - momentum) * rm0[k] + momentum * ref_mean[k];
      const double want_rv = (1 - momentum) * rv0[k] + momentum * ref_var[k] * m / (m - 1);
      EXPECT_NEAR(rm[k], want_rm, 1e-5 * (std::abs(want_rm) + spread)) << "running_mean " << k;
      EXPECT_NEAR(rv[k], want_rv, 1e-5 * want_rv) << "running_var " << k;
    }
  }
  EXPECT_LT(worst_mean, 1.0);
  EXPECT_LT(worst_invstd, 1.0);

  // Outputs: the reference in double from the reference statistics. The kernel rounds a few times in float and once
  // to T: each element within 3 units in the last place of T of the terms it adds, plus what the statistics'
  // tolerances above move it by, plus the smallest subnormal of T (half only).
  double worst_y = 0;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t k = i % c;
    const double xhat = (to_d(x.data[i]) - ref_mean[k]) * ref_invstd[k];
    double z = xhat * w[k] + b[k];
    if (residual) z += to_d(r.data[i]);
    const double want = silu ? silu_ref(z) : relu ? std::max(z, 0.0) : z;
    const double terms = std::abs(w[k] * xhat) + std::abs(b[k]) + (residual ? std::abs(to_d(r.data[i])) : 0.0);
    const double stats =
        std::abs(w[k]) * (1e-5 + 1.2e-7 * std::abs(ref_mean[k]) * ref_invstd[k] + 1e-5 * std::abs(xhat));
    // SiLU passes z's error on times its slope (at most 1.1) and adds its own float rounding.
    const double tol = (silu ? 1.1 : 1.0) * (3 * ulp<T>() * terms + (training ? stats : 0.0)) +
                       (silu ? 1e-6 * terms : 0.0) + tiny<T>();
    worst_y = std::max(worst_y, std::abs(to_d(y.data[i]) - want) / tol);
  }
  EXPECT_LT(worst_y, 1.0);

  // Backward, on the kernel's own y and statistics (as autograd runs it).
  BackwardArgs<T> ba;
  ba.dy = dy.data;
  ba.x = x.data;
  ba.y = y.data;
  ba.weight = w.data();
  ba.bias = b.data();
  ba.mean = mean.data();
  ba.invstd = invstd.data();
  ba.dx = dx.data;
  ba.dresidual = (residual && relu) ? dr.data : nullptr;
  ba.dweight = dw.data();
  ba.dbias = db.data();
  ba.relu = relu;
  ba.silu = silu;
  ba.batch_stats = training;
  if (p.vec > 1) {
    emulate_backward<T, 16 / sizeof(T)>(p, ba);
  } else {
    emulate_backward<T, 1>(p, ba);
  }
  std::vector<double> g(n), ref_db(c, 0.0), ref_dw(c, 0.0), abs_db(c, 0.0), abs_dw(c, 0.0);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t k = i % c;
    const double xhat = (to_d(x.data[i]) - mean[k]) * static_cast<double>(invstd[k]);
    if (silu) {
      g[i] = to_d(dy.data[i]) * silu_grad_ref(xhat * w[k] + b[k]);  // z from the forward's own statistics
    } else {
      g[i] = (relu && !(to_d(y.data[i]) > 0)) ? 0.0 : to_d(dy.data[i]);
    }
    // SiLU's slope is a difference of terms of dy's size (it crosses 0 at z = -1.278): its rounding is relative to dy.
    const double magnitude = silu ? std::abs(to_d(dy.data[i])) : std::abs(g[i]);
    ref_db[k] += g[i];
    ref_dw[k] += g[i] * xhat;
    abs_db[k] += magnitude;
    abs_dw[k] += magnitude * std::abs(xhat);
  }
  // Sums: float per thread, double across threads: within 1e-5 of the sum of magnitudes. dx: 3 units in the last
  // place of T of its terms, plus 1e-6 of them for the float statistics it uses.
  for (int64_t k = 0; k < c; ++k) {
    EXPECT_NEAR(db[k], ref_db[k], 1e-5 * abs_db[k] + 1e-6) << "dbias " << k;
    EXPECT_NEAR(dw[k], ref_dw[k], 1e-5 * abs_dw[k] + 1e-6) << "dweight " << k;
  }
  double worst_dx = 0;
  int64_t wrong_dr = 0;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t k = i % c;
    const double xhat = (to_d(x.data[i]) - mean[k]) * static_cast<double>(invstd[k]);
    const double a = w[k] * static_cast<double>(invstd[k]);
    double want = a * g[i], scale = std::abs(a) * (silu ? std::abs(to_d(dy.data[i])) : std::abs(g[i]));
    if (training) {
      want -= a * (ref_db[k] / m + xhat * ref_dw[k] / m);
      scale += std::abs(a) * (abs_db[k] / m + std::abs(xhat) * abs_dw[k] / m);
    }
    const double tol = 3 * ulp<T>() * scale + 1e-6 * scale + tiny<T>();
    worst_dx = std::max(worst_dx, std::abs(to_d(dx.data[i]) - want) / tol);
    if (ba.dresidual != nullptr && to_d(dr.data[i]) != g[i]) ++wrong_dr;
  }
  EXPECT_LT(worst_dx, 1.0);
  EXPECT_EQ(wrong_dr, 0) << "the stored residual gradient must equal the masked dy exactly";
  if constexpr (sizeof(T) == 2) {
    if (bits_case) expect_relu_bits_match_y<T>(p, ba, n, residual, bits);
    if (relu && !residual && p.vec == 8) {  // the forward writes none here; the backward reads them all the same
      std::vector<uint8_t> made(static_cast<size_t>(n / 8), 0);
      for (int64_t i = 0; i < n; ++i) made[i / 8] |= static_cast<uint8_t>((to_d(y.data[i]) > 0 ? 1U : 0U) << (i % 8));
      expect_relu_bits_match_y<T>(p, ba, n, residual, made);
    }
  }
  std::printf("[ emulated ] %-62s worst error / tolerance: mean %.2f invstd %.2f y %.2f dx %.2f\n", what.c_str(),
              worst_mean, worst_invstd, worst_y, worst_dx);
}

const Case kCases[] = {
    {2 * 7 * 7, 64, false, 132, 0.0},  // a few rows, one tile
    {49, 3, false, 132, 0.0},          // batch 1, 7x7, C = 3: scalar
    {4, 12, false, 132, 2.0},          // H*W = 1, N = 4; C = 12 is 16-byte wide only for float
    {777, 100, false, 132, 0.0},       // C = 100: scalar for half, four tiles
    {3 * 25, 2048, false, 132, 0.0},   // C = 2048: eight tiles of 256 (half) or sixteen of 128 (float)
    {6000, 256, false, 4, 30.0},       // many rows per thread, a large mean against the spread
    {2000, 64, true, 132, 0.0},        // misaligned: the scalar path on a vectorisable C
    {1499, 320, false, 3, -5.0},       // C = 320: two tiles of 20 lanes (half), a row count that is no multiple
};

template <typename T>
void run_all() {
  std::mt19937 rng = rn50::test::test_rng();
  for (const Case& cs : kCases) {
    for (int variant = 0; variant < 4; ++variant) {
      const bool residual = variant & 1, relu = variant & 2;
      run_case<T>(cs, residual, relu, /*training=*/true, rng);
    }
    run_case<T>(cs, true, true, /*training=*/false, rng);
    run_case<T>(cs, false, false, /*training=*/true, rng, /*silu=*/true);
    run_case<T>(cs, false, false, /*training=*/false, rng, /*silu=*/true);
  }
}

TEST(BatchNormKernelsHost, FloatMatchesFloat64Reference) { run_all<float>(); }
TEST(BatchNormKernelsHost, HalfMatchesFloat64Reference) { run_all<__half>(); }
TEST(BatchNormKernelsHost, BFloat16MatchesFloat64Reference) { run_all<__nv_bfloat16>(); }

TEST(BatchNormKernelsHost, PlanFillsTheGpuAndCoversEveryChannel) {
  // ResNet-50's shapes at batch 256 on 132 SMs: at least one block per SM (kBlocksPerSm aimed for), lanes * tiles
  // covering the channel vectors, one wave of blocks.
  for (const auto& [rows, channels] : std::vector<std::pair<int64_t, int64_t>>{{256 * 112 * 112, 64},
                                                                               {256 * 56 * 56, 256},
                                                                               {256 * 28 * 28, 512},
                                                                               {256 * 14 * 14, 1024},
                                                                               {256 * 49, 2048},
                                                                               {256 * 49, 512}}) {
    for (int bytes : {2, 4}) {
      const Plan p = impl::make_plan_for(rows, channels, bytes, true, 132);
      SCOPED_TRACE(std::to_string(rows) + " x " + std::to_string(channels) + " bytes " + std::to_string(bytes));
      EXPECT_EQ(p.vec, 16 / bytes);
      EXPECT_GE(static_cast<int64_t>(p.lanes) * p.tiles * p.vec, channels);
      EXPECT_LT(static_cast<int64_t>(p.lanes) * (p.tiles - 1) * p.vec, channels);
      EXPECT_LE(p.lanes * p.row_threads, impl::kThreads);
      EXPECT_GE(p.tiles * p.reduce_blocks, 132);
      EXPECT_LE(p.tiles * p.reduce_blocks, 132 * impl::kBlocksPerSm);
    }
  }
}

}  // namespace
}  // namespace rn50::ops::kernels
