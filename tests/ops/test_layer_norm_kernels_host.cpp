// tests/ops/test_layer_norm_kernels_host.cpp: rn50's row kernels (residual add + LayerNorm, scaled residual) emulated
// on the host (every block, warp and lane of each launch, running the same per-lane code as the GPU, the warp sums
// taken between the phases) against a float64 reference, on fresh random inputs. Needs the CUDA headers, no GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "ops/layer_norm_kernels_impl.cuh"
#include "tests/support/seeded_rng.h"

namespace rn50::ops::kernels {
namespace {

using rows::kRowsPerBlock;
using rows::kWarp;

constexpr int kSms = 3;  // a small "GPU": several blocks, each striding over several rows

template <typename T>
T from_double(double v) {
  T out;
  rows::from_float(static_cast<float>(v), out);
  return out;
}

template <typename T>
std::vector<T> to_type(const std::vector<double>& v) {
  std::vector<T> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = from_double<T>(v[i]);
  return out;
}

template <typename T>
std::vector<double> to_double(const std::vector<T>& v) {
  std::vector<double> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = rows::to_float(v[i]);
  return out;
}

// The values a T holds of v: the reference starts from what the kernels read.
template <typename T>
std::vector<double> rounded(const std::vector<double>& v) {
  return to_double(to_type<T>(v));
}

std::vector<double> random_values(size_t n, double mean, double spread, std::mt19937& rng) {
  std::normal_distribution<double> d(mean, spread);
  std::vector<double> v(n);
  for (double& x : v) x = d(rng);
  return v;
}

// ||a - b|| / ||b||: the norm-wise relative error.
double relative_error(const std::vector<double>& a, const std::vector<double>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!std::isfinite(a[i])) return INFINITY;
    num += (a[i] - b[i]) * (a[i] - b[i]);
    den += b[i] * b[i];
  }
  return std::sqrt(num / (den > 0 ? den : 1));
}

template <typename T>
double tolerance() {
  if (std::is_same_v<T, float>) return 2e-6;
  if (std::is_same_v<T, __half>) return 1.5e-3;
  return 1.2e-2;  // bfloat16
}

// Every row a (block, warp) pair of a launch of `blocks` blocks visits, in the kernels' order.
template <typename F>
void for_each_row(const RowPlan& p, int blocks, F&& f) {
  for (int b = 0; b < blocks; ++b) {
    for (int w = 0; w < kRowsPerBlock; ++w) {
      for (int64_t row = static_cast<int64_t>(b) * kRowsPerBlock + w; row < p.rows;
           row += static_cast<int64_t>(blocks) * kRowsPerBlock) {
        f(b, w, row);
      }
    }
  }
}

struct Case {
  int64_t rows;
  int64_t width;
  int max_vec;
};

std::string name_of(const Case& c) {
  return std::to_string(c.rows) + "x" + std::to_string(c.width) + " max_vec " + std::to_string(c.max_vec);
}

const std::vector<Case> kCases = {{37, 96, 8}, {64, 192, 8}, {19, 384, 8}, {45, 768, 8}, {9, 1024, 8},
                                  {40, 32, 8}, {23, 128, 1}, {70, 64, 2}, {5, 256, 8}};

template <typename X, typename B, typename Y, int V>
void emulate_forward(const RowPlan& p, const LayerNormForwardArgs<X, B, Y>& a) {
  const int blocks = rows::forward_blocks(p, kSms);
  for_each_row(p, blocks, [&](int, int, int64_t row) {
    std::vector<rows::Lane<V>> s(kWarp);
    float total = 0;
    for (int lane = 0; lane < kWarp; ++lane) {
      total += a.branch != nullptr ? rows::ln_load<X, B, V, true>(p, lane, row, a.x, a.branch, s[lane])
                                   : rows::ln_load<X, B, V, false>(p, lane, row, a.x, a.branch, s[lane]);
    }
    const float mean = total * (1.0f / static_cast<float>(p.width));
    float sq = 0;
    for (int lane = 0; lane < kWarp; ++lane) sq += rows::ln_square<V>(p, s[lane], mean);
    const float rstd = rows::ln_rstd(sq, p.width, a.eps);
    a.mean[row] = mean;
    a.rstd[row] = rstd;
    for (int lane = 0; lane < kWarp; ++lane) {
      if (a.branch != nullptr) {
        rows::ln_store<X, Y, V, true>(p, lane, row, s[lane], mean, rstd, a.weight, a.bias, a.sum, a.y);
      } else {
        rows::ln_store<X, Y, V, false>(p, lane, row, s[lane], mean, rstd, a.weight, a.bias, a.sum, a.y);
      }
    }
  });
}

template <typename X, typename B, typename Y, int V, bool kDsum, bool kBranch>
void emulate_backward(const RowPlan& p, const LayerNormBackwardArgs<X, B, Y>& a, std::vector<float>& part_w,
                      std::vector<float>& part_b) {
  std::vector<float> smem(2 * kRowsPerBlock * p.width, NAN);  // poisoned: every column must be zeroed first
  for (int b = 0; b < p.blocks; ++b) {
    for (int w = 0; w < kRowsPerBlock; ++w) {
      for (int lane = 0; lane < kWarp; ++lane) {
        rows::zero_columns<V>(p, lane, smem.data() + w * p.width);
        rows::zero_columns<V>(p, lane, smem.data() + (kRowsPerBlock + w) * p.width);
      }
    }
    for (int w = 0; w < kRowsPerBlock; ++w) {
      float* dweight = smem.data() + w * p.width;
      float* dbias = smem.data() + (kRowsPerBlock + w) * p.width;
      for (int64_t row = static_cast<int64_t>(b) * kRowsPerBlock + w; row < p.rows;
           row += static_cast<int64_t>(p.blocks) * kRowsPerBlock) {
        std::vector<rows::Lane<V>> g(kWarp), xhat(kWarp);
        float sum_g = 0, sum_gx = 0;
        for (int lane = 0; lane < kWarp; ++lane) {
          float lg, lgx;
          rows::lnb_load<X, Y, V>(p, lane, row, a.dy, a.s, a.weight, a.mean[row], a.rstd[row], g[lane], xhat[lane],
                                  dweight, dbias, lg, lgx);
          sum_g += lg;
          sum_gx += lgx;
        }
        const float inv = 1.0f / static_cast<float>(p.width);
        for (int lane = 0; lane < kWarp; ++lane) {
          rows::lnb_store<X, B, V, kDsum, kBranch>(p, lane, row, g[lane], xhat[lane], sum_g * inv, sum_gx * inv,
                                                   a.rstd[row], a.dsum, a.dx, a.dbranch);
        }
      }
    }
    rows::shared_to_partial(p, 0, 1, b, smem.data(), part_w.data());
    rows::shared_to_partial(p, 0, 1, b, smem.data() + kRowsPerBlock * p.width, part_b.data());
  }
  for (int64_t c = 0; c < p.width; ++c) {
    a.dweight[c] = rows::finalize_column(p, c, part_w.data());
    a.dbias[c] = rows::finalize_column(p, c, part_b.data());
  }
}

template <typename X, typename B, typename Y, int V>
void run_layer_norm_case(const Case& c, bool branch, bool dsum, std::mt19937& rng) {
  SCOPED_TRACE(name_of(c) + (branch ? " branch" : "") + (dsum ? " dsum" : ""));
  const RowPlan p = rows::make_row_plan_for(c.rows, c.width, c.max_vec, kSms);
  ASSERT_TRUE(p.supported);
  ASSERT_EQ(p.vec, V);
  const size_t n = static_cast<size_t>(c.rows * c.width);
  // Rows far from zero mean: a one-pass variance would lose them to cancellation.
  const std::vector<double> x = rounded<X>(random_values(n, 3.0, 1.5, rng));
  const std::vector<double> br = branch ? rounded<B>(random_values(n, -1.0, 0.7, rng)) : std::vector<double>(n, 0.0);
  const std::vector<double> w = rounded<float>(random_values(c.width, 1.0, 0.3, rng));
  const std::vector<double> bias = rounded<float>(random_values(c.width, 0.0, 0.3, rng));
  const std::vector<double> dy = rounded<Y>(random_values(n, 0.0, 1.0, rng));
  const std::vector<double> ds_in = dsum ? rounded<X>(random_values(n, 0.0, 0.5, rng)) : std::vector<double>(n, 0.0);
  const double eps = 1e-6;

  // float64 reference
  std::vector<double> s(n), y(n), dx(n), dw(c.width, 0), db(c.width, 0);
  for (int64_t r = 0; r < c.rows; ++r) {
    double mean = 0, var = 0;
    for (int64_t k = 0; k < c.width; ++k) mean += s[r * c.width + k] = x[r * c.width + k] + br[r * c.width + k];
    mean /= c.width;
    for (int64_t k = 0; k < c.width; ++k) var += std::pow(s[r * c.width + k] - mean, 2);
    const double rstd = 1.0 / std::sqrt(var / c.width + eps);
    double mg = 0, mgx = 0;
    for (int64_t k = 0; k < c.width; ++k) {
      const size_t i = r * c.width + k;
      const double xh = (s[i] - mean) * rstd;
      y[i] = xh * w[k] + bias[k];
      mg += dy[i] * w[k];
      mgx += dy[i] * w[k] * xh;
      dw[k] += dy[i] * xh;
      db[k] += dy[i];
    }
    mg /= c.width;
    mgx /= c.width;
    for (int64_t k = 0; k < c.width; ++k) {
      const size_t i = r * c.width + k;
      dx[i] = rstd * (dy[i] * w[k] - mg - (s[i] - mean) * rstd * mgx) + ds_in[i];
    }
  }

  // The kernels, emulated.
  const std::vector<X> xt = to_type<X>(x), dst = to_type<X>(ds_in);
  const std::vector<B> bt = to_type<B>(br);
  const std::vector<Y> dyt = to_type<Y>(dy);
  const std::vector<float> wt(w.begin(), w.end()), biast(bias.begin(), bias.end());
  std::vector<X> sum_out(n, from_double<X>(NAN)), dx_out(n, from_double<X>(NAN));
  std::vector<B> dbranch_out(n, from_double<B>(NAN));
  std::vector<Y> y_out(n, from_double<Y>(NAN));
  std::vector<float> mean(c.rows, NAN), rstd(c.rows, NAN), dw_out(c.width, NAN), db_out(c.width, NAN);
  LayerNormForwardArgs<X, B, Y> fa;
  fa.x = xt.data();
  fa.branch = branch ? bt.data() : nullptr;
  fa.sum = branch ? sum_out.data() : nullptr;
  fa.y = y_out.data();
  fa.weight = wt.data();
  fa.bias = biast.data();
  fa.mean = mean.data();
  fa.rstd = rstd.data();
  fa.eps = static_cast<float>(eps);
  emulate_forward<X, B, Y, V>(p, fa);
  EXPECT_LT(relative_error(to_double(y_out), y), tolerance<Y>());
  if (branch) {
    EXPECT_LT(relative_error(to_double(sum_out), s), tolerance<X>());
  }

  LayerNormBackwardArgs<X, B, Y> ba;
  ba.dy = dyt.data();
  const std::vector<X>& saved = branch ? sum_out : xt;
  ba.s = saved.data();
  ba.dsum = dsum ? dst.data() : nullptr;
  ba.weight = wt.data();
  ba.mean = mean.data();
  ba.rstd = rstd.data();
  ba.dx = dx_out.data();
  ba.dbranch = branch ? dbranch_out.data() : nullptr;
  ba.dweight = dw_out.data();
  ba.dbias = db_out.data();
  std::vector<float> part_w(static_cast<size_t>(p.blocks * p.width), NAN), part_b(part_w.size(), NAN);
  if (dsum && branch) emulate_backward<X, B, Y, V, true, true>(p, ba, part_w, part_b);
  if (dsum && !branch) emulate_backward<X, B, Y, V, true, false>(p, ba, part_w, part_b);
  if (!dsum && branch) emulate_backward<X, B, Y, V, false, true>(p, ba, part_w, part_b);
  if (!dsum && !branch) emulate_backward<X, B, Y, V, false, false>(p, ba, part_w, part_b);
  // The reference's gradient starts from the sum the kernels saved: the forward's rounding of s is not the backward's.
  EXPECT_LT(relative_error(to_double(dx_out), dx), 4 * tolerance<X>() + tolerance<Y>());
  if (branch) {
    EXPECT_LT(relative_error(to_double(dbranch_out), dx), 4 * tolerance<B>() + tolerance<Y>());
  }
  EXPECT_LT(relative_error(to_double(dw_out), dw), tolerance<X>() + tolerance<Y>());
  EXPECT_LT(relative_error(to_double(db_out), db), 1e-6);
}

template <typename X, typename B, typename Y>
void run_layer_norm_cases(std::mt19937& rng) {
  for (const Case& c : kCases) {
    const RowPlan p = rows::make_row_plan_for(c.rows, c.width, c.max_vec, kSms);
    for (bool branch : {false, true}) {
      for (bool dsum : {false, true}) {
        switch (p.vec) {
          case 8:
            run_layer_norm_case<X, B, Y, 8>(c, branch, dsum, rng);
            break;
          case 4:
            run_layer_norm_case<X, B, Y, 4>(c, branch, dsum, rng);
            break;
          case 2:
            run_layer_norm_case<X, B, Y, 2>(c, branch, dsum, rng);
            break;
          default:
            run_layer_norm_case<X, B, Y, 1>(c, branch, dsum, rng);
        }
      }
    }
  }
}

TEST(LayerNormKernelsHost, PlanCoversEveryWidthItSaysItTakes) {
  for (int64_t width = 1; width <= 1100; ++width) {
    const RowPlan p = rows::make_row_plan_for(10, width, 8, kSms);
    if (!p.supported) continue;
    EXPECT_EQ(static_cast<int64_t>(kWarp) * p.vec * p.items, width) << width;
    EXPECT_LE(p.items, rows::kMaxItems);
  }
  EXPECT_TRUE(rows::make_row_plan_for(10, 768, 8, kSms).supported);
  EXPECT_EQ(rows::make_row_plan_for(10, 768, 8, kSms).vec, 8);
  EXPECT_EQ(rows::make_row_plan_for(10, 96, 8, kSms).vec, 1);
  EXPECT_FALSE(rows::make_row_plan_for(10, 100, 8, kSms).supported);
  EXPECT_FALSE(rows::make_row_plan_for(10, 2048, 8, kSms).supported);
  EXPECT_FALSE(rows::make_row_plan_for(10, 768, 1, kSms).supported);  // 24 scalar items a lane: more than 4
}

TEST(LayerNormKernelsHost, FloatStreamHalfBranchAndOutputMatchFloat64) {
  std::mt19937 rng = rn50::test::test_rng();
  run_layer_norm_cases<float, __half, __half>(rng);
}

TEST(LayerNormKernelsHost, FloatEverywhereMatchesFloat64) {
  std::mt19937 rng = rn50::test::test_rng();
  run_layer_norm_cases<float, float, float>(rng);
}

TEST(LayerNormKernelsHost, HalfInHalfOutAndHalfInFloatOutMatchFloat64) {
  std::mt19937 rng = rn50::test::test_rng();
  run_layer_norm_cases<__half, __half, __half>(rng);
  run_layer_norm_cases<__half, __half, float>(rng);
}

TEST(LayerNormKernelsHost, BFloat16MatchesFloat64) {
  std::mt19937 rng = rn50::test::test_rng();
  run_layer_norm_cases<float, __nv_bfloat16, __nv_bfloat16>(rng);
  run_layer_norm_cases<__nv_bfloat16, __nv_bfloat16, float>(rng);
}

template <typename Y, int V>
void run_scaled_residual_case(const Case& c, bool with_scale, std::mt19937& rng) {
  SCOPED_TRACE(name_of(c) + (with_scale ? " scale" : ""));
  const RowPlan p = rows::make_row_plan_for(c.rows, c.width, c.max_vec, kSms);
  ASSERT_EQ(p.vec, V);
  const int64_t per_sample = 4;  // rows of one sample (H * W)
  const int64_t samples = (c.rows + per_sample - 1) / per_sample;
  const size_t n = static_cast<size_t>(c.rows * c.width);
  const std::vector<double> x = rounded<float>(random_values(n, 0.5, 1.0, rng));
  const std::vector<double> y = rounded<Y>(random_values(n, 0.0, 1.0, rng));
  const std::vector<double> gamma = rounded<float>(random_values(c.width, 0.0, 0.5, rng));
  const std::vector<double> dout = rounded<float>(random_values(n, 0.0, 1.0, rng));
  std::vector<double> scale(samples, 1.0);
  for (int64_t i = 0; i < samples; ++i) scale[i] = with_scale ? (rng() % 4 == 0 ? 0.0 : 1.0 / 0.9) : 1.0;
  scale = rounded<float>(scale);

  std::vector<double> out(n), dy(n), dgamma(c.width, 0.0);
  for (int64_t r = 0; r < c.rows; ++r) {
    const double m = scale[r / per_sample];
    for (int64_t k = 0; k < c.width; ++k) {
      const size_t i = r * c.width + k;
      out[i] = x[i] + gamma[k] * y[i] * m;
      dy[i] = dout[i] * m * gamma[k];
      dgamma[k] += dout[i] * m * y[i];
    }
  }
  const std::vector<float> xt = to_type<float>(x), gt = to_type<float>(gamma), st = to_type<float>(scale),
                           dt = to_type<float>(dout);
  const std::vector<Y> yt = to_type<Y>(y);
  std::vector<float> out_t(n, NAN), dgamma_t(c.width, NAN);
  std::vector<Y> dy_t(n, from_double<Y>(NAN));
  const int blocks = rows::forward_blocks(p, kSms);
  for_each_row(p, blocks, [&](int, int, int64_t row) {
    for (int lane = 0; lane < kWarp; ++lane) {
      if (with_scale) {
        rows::sr_forward_row<float, Y, V, true>(p, lane, row, xt.data(), yt.data(), gt.data(), st.data(), per_sample,
                                                out_t.data());
      } else {
        rows::sr_forward_row<float, Y, V, false>(p, lane, row, xt.data(), yt.data(), gt.data(), nullptr, per_sample,
                                                 out_t.data());
      }
    }
  });
  std::vector<float> smem(kRowsPerBlock * p.width, NAN), part(static_cast<size_t>(p.blocks * p.width), NAN);
  for (int b = 0; b < p.blocks; ++b) {
    for (int w = 0; w < kRowsPerBlock; ++w) {
      for (int lane = 0; lane < kWarp; ++lane) rows::zero_columns<V>(p, lane, smem.data() + w * p.width);
      for (int64_t row = static_cast<int64_t>(b) * kRowsPerBlock + w; row < p.rows;
           row += static_cast<int64_t>(p.blocks) * kRowsPerBlock) {
        for (int lane = 0; lane < kWarp; ++lane) {
          float* columns = smem.data() + w * p.width;
          if (with_scale) {
            rows::sr_backward_row<float, Y, V, true>(p, lane, row, dt.data(), yt.data(), gt.data(), st.data(),
                                                     per_sample, dy_t.data(), columns);
          } else {
            rows::sr_backward_row<float, Y, V, false>(p, lane, row, dt.data(), yt.data(), gt.data(), nullptr,
                                                      per_sample, dy_t.data(), columns);
          }
        }
      }
    }
    rows::shared_to_partial(p, 0, 1, b, smem.data(), part.data());
  }
  for (int64_t k = 0; k < c.width; ++k) dgamma_t[k] = rows::finalize_column(p, k, part.data());
  EXPECT_LT(relative_error(to_double(out_t), out), tolerance<float>());
  EXPECT_LT(relative_error(to_double(dy_t), dy), tolerance<Y>());
  EXPECT_LT(relative_error(to_double(dgamma_t), dgamma), 1e-5);
}

template <typename Y>
void run_scaled_residual_cases(std::mt19937& rng) {
  for (const Case& c : kCases) {
    for (bool with_scale : {false, true}) {
      switch (rows::make_row_plan_for(c.rows, c.width, c.max_vec, kSms).vec) {
        case 8:
          run_scaled_residual_case<Y, 8>(c, with_scale, rng);
          break;
        case 4:
          run_scaled_residual_case<Y, 4>(c, with_scale, rng);
          break;
        case 2:
          run_scaled_residual_case<Y, 2>(c, with_scale, rng);
          break;
        default:
          run_scaled_residual_case<Y, 1>(c, with_scale, rng);
      }
    }
  }
}

TEST(LayerNormKernelsHost, ScaledResidualMatchesFloat64) {
  std::mt19937 rng = rn50::test::test_rng();
  run_scaled_residual_cases<__half>(rng);
  run_scaled_residual_cases<float>(rng);
  run_scaled_residual_cases<__nv_bfloat16>(rng);
}

}  // namespace
}  // namespace rn50::ops::kernels
