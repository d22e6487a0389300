// ops/max_pool_kernels_impl.cuh: the per-thread work of rn50's max-pool kernels (ops/max_pool_kernels.cu) as
// host-and-device functions of a work item, so that tests/ops/test_max_pool_kernels_host.cpp runs the same code on
// the CPU.
#pragma once

#include <cstdint>

// The BatchNorm kernels' vector access (Pack, load_pack, unpack, pack_of) and the RN50_HD / RN50_UNROLL macros.
#include "ops/batch_norm_kernels_impl.cuh"
#include "ops/max_pool_kernels.h"

namespace rn50::ops::kernels::pool_impl {

using impl::load_pack;
using impl::Pack;
using impl::unpack;

RN50_HD inline int fast_div(const FastDiv& f, int n) {
  if (f.d == 1) return n;
#if defined(__CUDA_ARCH__)
  return static_cast<int>(__umulhi(static_cast<unsigned>(n), f.mul) >> f.shift);
#else
  return static_cast<int>(((static_cast<uint64_t>(static_cast<uint32_t>(n)) * f.mul) >> 32) >> f.shift);
#endif
}

// n / d, with n % d in `rem`.
RN50_HD inline int divmod(const FastDiv& f, int n, int& rem) {
  const int q = fast_div(f, n);
  rem = n - q * f.d;
  return q;
}

// `v != v` rather than isnan: one spelling for the host and the device compilers (neither builds with fast math).
RN50_HD inline bool is_nan(float v) { return v != v; }

// The one-byte positions of a channel vector, stored as one access like the values.
template <int VEC>
struct Positions;
template <>
struct Positions<8> {
  uint2 r;
};
template <>
struct Positions<4> {
  unsigned int r;
};
template <>
struct Positions<1> {
  unsigned char r;
};

template <int VEC>
RN50_HD inline Positions<VEC> load_positions(const uint8_t* __restrict__ p) {
  Positions<VEC> pos;
  pos.r = *reinterpret_cast<const decltype(pos.r)*>(p);
  return pos;
}

RN50_HD inline int position_of(const Positions<8>& p, int lane) {
  return static_cast<int>(((lane < 4 ? p.r.x : p.r.y) >> (8 * (lane & 3))) & 0xffu);
}
RN50_HD inline int position_of(const Positions<4>& p, int lane) {
  return static_cast<int>((p.r >> (8 * lane)) & 0xffu);
}
RN50_HD inline int position_of(const Positions<1>& p, int) { return p.r; }

template <int VEC>
RN50_HD inline void store_positions(uint8_t* __restrict__ out, const uint8_t (&at)[VEC]) {
  Positions<VEC> pos;
  if constexpr (VEC == 8) {
    pos.r.x = at[0] | (at[1] << 8) | (at[2] << 16) | (static_cast<unsigned>(at[3]) << 24);
    pos.r.y = at[4] | (at[5] << 8) | (at[6] << 16) | (static_cast<unsigned>(at[7]) << 24);
  } else if constexpr (VEC == 4) {
    pos.r = at[0] | (at[1] << 8) | (at[2] << 16) | (static_cast<unsigned>(at[3]) << 24);
  } else {
    pos.r = at[0];
  }
  *reinterpret_cast<decltype(pos.r)*>(out) = pos.r;
}

// The max so far of a channel vector and its position in the window.
template <int VEC>
struct Best {
  float value[VEC];
  uint8_t at[VEC];
};

// ATen's rule: an element replaces the max when it is greater, or NaN. So the first of equal maxima in the window's
// row-major order stays, and the last NaN wins; comparisons in float are those of the 16-bit types themselves.
template <int VEC>
RN50_HD inline void take(const float (&f)[VEC], int position, Best<VEC>& b) {
  RN50_UNROLL
  for (int l = 0; l < VEC; ++l) {
    if (f[l] > b.value[l] || is_nan(f[l])) {
      b.value[l] = f[l];
      b.at[l] = static_cast<uint8_t>(position);
    }
  }
}

// ---- BatchNorm+ReLU on the way in (ops/norm_pool.h) --------------------------------------------------------------

// Each element as batch_norm_kernels' normalize pass would have stored it: fmaf(x - mean, weight * invstd, bias),
// ReLU (NaN stays NaN), rounded to T. The pool's values and maxima are then bit for bit those of the two ops apart.
template <typename T, int VEC>
struct NormRelu {
  float mean[VEC], scale[VEC], shift[VEC];
};

template <typename T, int VEC>
RN50_HD inline NormRelu<T, VEC> norm_relu_of(const PoolNorm& n, int64_t c0) {
  NormRelu<T, VEC> r;
  RN50_UNROLL
  for (int l = 0; l < VEC; ++l) {
    r.mean[l] = n.mean[c0 + l];
    r.scale[l] = n.weight[c0 + l] * n.invstd[c0 + l];
    r.shift[l] = n.bias[c0 + l];
  }
  return r;
}

template <typename T, int VEC>
RN50_HD inline float normalised(const NormRelu<T, VEC>& r, int l, float f) {
  const float z = fmaf(f - r.mean[l], r.scale[l], r.shift[l]);
  return z < 0.0f ? 0.0f : z;
}

template <typename T, int VEC>
RN50_HD inline void apply(const NormRelu<T, VEC>& r, float (&f)[VEC]) {
  RN50_UNROLL
  for (int l = 0; l < VEC; ++l) {
    const float out[1] = {normalised(r, l, f[l])};
    float rounded[1];
    unpack(impl::pack_of(out, T{}), rounded);
    f[l] = rounded[0];
  }
}

// ---- the same on two 16-bit lanes at a time (forward_item's path for 8 half or bfloat16 channels) -----------------

// Where word a's lanes (two T in 32 bits, the lower first) are greater than b's, or NaN: 0xffff per lane.
RN50_HD inline unsigned int taken_mask(unsigned int a, unsigned int b, __half) {
  const __half2 ha = impl::bit_cast<__half2>(a), hb = impl::bit_cast<__half2>(b);
  return __hgt2_mask(ha, hb) | __hneu2_mask(ha, ha);
}
RN50_HD inline unsigned int taken_mask(unsigned int a, unsigned int b, __nv_bfloat16) {
  const __nv_bfloat162 ha = impl::bit_cast<__nv_bfloat162>(a), hb = impl::bit_cast<__nv_bfloat162>(b);
  return __hgt2_mask(ha, hb) | __hneu2_mask(ha, ha);
}
RN50_HD inline unsigned int greater_mask(unsigned int a, unsigned int b, __half) {
  return __hgt2_mask(impl::bit_cast<__half2>(a), impl::bit_cast<__half2>(b));
}
RN50_HD inline unsigned int greater_mask(unsigned int a, unsigned int b, __nv_bfloat16) {
  return __hgt2_mask(impl::bit_cast<__nv_bfloat162>(a), impl::bit_cast<__nv_bfloat162>(b));
}
RN50_HD inline constexpr unsigned int minus_infinity_pair(__half) { return 0xfc00fc00u; }
RN50_HD inline constexpr unsigned int minus_infinity_pair(__nv_bfloat16) { return 0xff80ff80u; }

// take() for the normalised elements of one window place, a word (two lanes) at a time: the element's lanes rounded to
// T (h), compared as T (greater, or NaN: take()'s rule, so the same choices), and the max, its position (a 16-bit
// lane of `at`) and its raw element (x_at) replaced where the mask says.
template <typename T>
RN50_HD inline void take_word(unsigned int h, unsigned int raw, unsigned int position_pair, unsigned int& best,
                              unsigned int& at, unsigned int& best_raw) {
  const unsigned int m = taken_mask(h, best, T{});
  best = (h & m) | (best & ~m);
  at = (position_pair & m) | (at & ~m);
  best_raw = (raw & m) | (best_raw & ~m);
}

// take() that also keeps the element's value before BatchNorm+ReLU (`raw`) of the max: bn_relu_max_pool's x_at.
template <int VEC>
RN50_HD inline void take(const float (&f)[VEC], const float (&raw)[VEC], int position, Best<VEC>& b,
                         float (&best_raw)[VEC]) {
  RN50_UNROLL
  for (int l = 0; l < VEC; ++l) {
    if (f[l] > b.value[l] || is_nan(f[l])) {
      b.value[l] = f[l];
      b.at[l] = static_cast<uint8_t>(position);
      best_raw[l] = raw[l];
    }
  }
}

// ---- forward: one output pixel's channel vector ---------------------------------------------------------------------

// The window at (y0, x0) of a kernel up to kSmallWindow each way, loaded at once: e[j] for window place
// (j / kSmallWindow, j % kSmallWindow) where inside[j] (inside the kernel and the input), so that a thread has the
// whole window in flight before its first comparison.
template <typename T, int VEC>
RN50_HD inline void load_window(const PoolShape& s, int y0, int x0, const T* __restrict__ image,
                                Pack<T, VEC> (&e)[kSmallWindow * kSmallWindow],
                                bool (&inside)[kSmallWindow * kSmallWindow]) {
  constexpr int K = kSmallWindow;
  const int h = static_cast<int>(s.h), w = static_cast<int>(s.w);
  RN50_UNROLL
  for (int j = 0; j < K * K; ++j) {
    const int dy = j / K, dx = j % K, yy = y0 + dy, xx = x0 + dx;
    inside[j] = dy < s.kh && dx < s.kw && yy >= 0 && yy < h && xx >= 0 && xx < w;
    if (inside[j]) e[j] = load_pack<T, VEC>(image + (static_cast<int64_t>(yy) * w + xx) * s.c);
  }
}

// forward_item with kSmall and kNorm for 8 channels of a 16-bit T: the window loaded at once, each element normalised
// in float as apply() does, rounded to T two lanes to a word, and the max, position and raw element taken a word at a
// time (take_word). The results are forward_item's float path's, bit for bit; the comparisons and selections of two
// lanes take one instruction each instead of several a lane (the float path was issue-bound on an H100: 0.43 ms at
// batch 256, 46% of DRAM bandwidth).
template <typename T>
RN50_HD inline void forward_norm_words(const PoolPlan& p, int pixel, int y0, int x0, int64_t c0,
                                       const T* __restrict__ image, const NormRelu<T, 8>& nr, T* __restrict__ y,
                                       uint8_t* __restrict__ positions, T* __restrict__ x_at) {
  const PoolShape& s = p.s;
  constexpr int K = kSmallWindow;
  Pack<T, 8> e[K * K]{};
  bool inside[K * K];
  load_window<T, 8>(s, y0, x0, image, e, inside);
  // Every window has an element inside (padding is at most half the kernel) and its normalised value beats -inf, so
  // the first inside element is taken first, as forward_item's `first` has it.
  unsigned int best[4], at[4] = {}, best_raw[4] = {};
  RN50_UNROLL
  for (int k = 0; k < 4; ++k) best[k] = minus_infinity_pair(T{});
  RN50_UNROLL
  for (int j = 0; j < K * K; ++j) {
    if (!inside[j]) continue;
    float f[8];
    unpack(e[j], f);
    RN50_UNROLL
    for (int l = 0; l < 8; ++l) f[l] = normalised(nr, l, f[l]);
    const Pack<T, 8> rounded = impl::pack_of(f, T{});
    const unsigned int position = static_cast<unsigned int>((j / K) * s.kw + j % K);
    const unsigned int pair = position | (position << 16);
    take_word<T>(rounded.r.x, e[j].r.x, pair, best[0], at[0], best_raw[0]);
    take_word<T>(rounded.r.y, e[j].r.y, pair, best[1], at[1], best_raw[1]);
    take_word<T>(rounded.r.z, e[j].r.z, pair, best[2], at[2], best_raw[2]);
    take_word<T>(rounded.r.w, e[j].r.w, pair, best[3], at[3], best_raw[3]);
  }
  // ReLU's backward passes nothing to a max that is not above zero (or NaN): kNoGradient there.
  constexpr unsigned int kNone = kNoGradient | (kNoGradient << 16);
  RN50_UNROLL
  for (int k = 0; k < 4; ++k) {
    const unsigned int above = greater_mask(best[k], 0u, T{});
    at[k] = (at[k] & above) | (kNone & ~above);
  }
  const int64_t out = static_cast<int64_t>(pixel) * s.c + c0;
  impl::store_pack<T, 8>(y + out, Pack<T, 8>{make_uint4(best[0], best[1], best[2], best[3])});
  Positions<8> pos;
  pos.r.x = (at[0] & 0xffu) | ((at[0] >> 8) & 0xff00u) | ((at[1] & 0xffu) << 16) | ((at[1] & 0xff0000u) << 8);
  pos.r.y = (at[2] & 0xffu) | ((at[2] >> 8) & 0xff00u) | ((at[3] & 0xffu) << 16) | ((at[3] & 0xff0000u) << 8);
  *reinterpret_cast<uint2*>(positions + out) = pos.r;
  if (x_at != nullptr) {
    impl::store_pack<T, 8>(x_at + out, Pack<T, 8>{make_uint4(best_raw[0], best_raw[1], best_raw[2], best_raw[3])});
  }
}

// With kSmall (kh, kw <= kSmallWindow) the window is loaded at once (load_window); otherwise element by element.
// With kNorm each element goes through `norm` (BatchNorm+ReLU) before the comparison, and an output whose max is not
// above zero (or NaN) gets kNoGradient as its position: ReLU's backward gives such an element no gradient; and
// x_at, where not null, gets the max's element as x holds it (before BatchNorm), which BatchNorm's backward sums over
// the outputs (batch_norm_backward_pooled) instead of gathering every input's gradient.
template <typename T, int VEC, bool kSmall, bool kNorm = false>
RN50_HD inline void forward_item(const PoolPlan& p, int item, const T* __restrict__ x, T* __restrict__ y,
                                 uint8_t* __restrict__ positions, const PoolNorm& norm = {},
                                 T* __restrict__ x_at = nullptr) {
  const PoolShape& s = p.s;
  const int h = static_cast<int>(s.h), w = static_cast<int>(s.w);
  int v, ox, oy;
  const int pixel = divmod(p.vectors, item, v);
  const int n = divmod(p.out_h, divmod(p.out_w, pixel, ox), oy);
  const int y0 = oy * s.sh - s.ph, x0 = ox * s.sw - s.pw;
  const int64_t c0 = static_cast<int64_t>(v) * VEC;
  const T* __restrict__ image = x + static_cast<int64_t>(n) * h * w * s.c + c0;
  NormRelu<T, VEC> nr{};
  if constexpr (kNorm) nr = norm_relu_of<T, VEC>(norm, c0);
  if constexpr (kSmall && kNorm && VEC == 8 && sizeof(T) == 2) {
    forward_norm_words<T>(p, pixel, y0, x0, c0, image, nr, y, positions, x_at);
    return;
  }
  Best<VEC> best;
  float best_raw[VEC] = {};  // kNorm: every window has an element inside, and ReLU's output beats -inf
  // A window of nothing but -inf keeps its first element inside the input: where ATen's CPU kernel starts.
  const int first = ((y0 < 0 ? 0 : y0) - y0) * s.kw + ((x0 < 0 ? 0 : x0) - x0);
  RN50_UNROLL
  for (int l = 0; l < VEC; ++l) {
    best.value[l] = impl::bit_cast<float>(0xff800000u);  // -inf
    best.at[l] = static_cast<uint8_t>(first);
  }
  if constexpr (kSmall) {
    constexpr int K = kSmallWindow;
    Pack<T, VEC> e[K * K]{};
    bool inside[K * K];
    load_window<T, VEC>(s, y0, x0, image, e, inside);
    RN50_UNROLL
    for (int j = 0; j < K * K; ++j) {
      if (!inside[j]) continue;
      float f[VEC];
      unpack(e[j], f);
      if constexpr (kNorm) {
        float raw[VEC];
        unpack(e[j], raw);
        apply(nr, f);
        take(f, raw, (j / K) * s.kw + j % K, best, best_raw);
      } else {
        take(f, (j / K) * s.kw + j % K, best);
      }
    }
  } else {
    for (int dy = 0; dy < s.kh; ++dy) {
      const int yy = y0 + dy;
      if (yy < 0 || yy >= h) continue;
      for (int dx = 0; dx < s.kw; ++dx) {
        const int xx = x0 + dx;
        if (xx < 0 || xx >= w) continue;
        float f[VEC];
        impl::load<T, VEC>(image + (static_cast<int64_t>(yy) * w + xx) * s.c, f);
        if constexpr (kNorm) {
          float raw[VEC];
          RN50_UNROLL
          for (int l = 0; l < VEC; ++l) raw[l] = f[l];
          apply(nr, f);
          take(f, raw, dy * s.kw + dx, best, best_raw);
        } else {
          take(f, dy * s.kw + dx, best);
        }
      }
    }
  }
  if constexpr (kNorm) {
    RN50_UNROLL
    for (int l = 0; l < VEC; ++l) {
      if (!(best.value[l] > 0.0f)) best.at[l] = static_cast<uint8_t>(kNoGradient);
    }
  }
  const int64_t out = static_cast<int64_t>(pixel) * s.c + c0;
  impl::store<T, VEC>(y + out, best.value);
  store_positions<VEC>(positions + out, best.at);
  if constexpr (kNorm) {
    if (x_at != nullptr) impl::store<T, VEC>(x_at + out, best_raw);  // values of T: stored exactly
  }
}

// ---- backward: one input pixel's channel vector ---------------------------------------------------------------------

// The outputs whose windows cover input row (or column) i: [begin, end), as ATen's kernels bound them.
struct Cover {
  int begin, end;
};

RN50_HD inline Cover cover_of(int i, int kernel, int pad, int outputs, const FastDiv& stride) {
  Cover c;
  c.begin = i + pad < kernel ? 0 : fast_div(stride, i + pad - kernel) + 1;
  const int last = fast_div(stride, i + pad) + 1;
  c.end = last < outputs ? last : outputs;
  return c;
}

// Adds to `acc` the lanes of g whose output's position is `position` (this input element's place in that output's
// window).
template <int VEC>
RN50_HD inline void add_hits(const Positions<VEC>& pos, int position, const float (&g)[VEC], float (&acc)[VEC]) {
  RN50_UNROLL
  for (int l = 0; l < VEC; ++l) {
    if (position_of(pos, l) == position) acc[l] += g[l];
  }
}

template <int VEC>
RN50_HD inline bool any_hit(const Positions<VEC>& pos, int position) {
  bool hit = false;
  RN50_UNROLL
  for (int l = 0; l < VEC; ++l) hit = hit || position_of(pos, l) == position;
  return hit;
}

// The covering outputs in row-major order, summed in float from zero: ATen's CUDA kernels' order, so that float32
// results equal theirs. With kFew (at most kFewCovers^2 covering outputs) the positions of all are loaded first, then
// the gradients of those that point here, then the sums; a gradient no lane takes is not read. With kEager as well,
// the gradients are loaded with the positions (PoolPlan::gradients_with_positions); the sums are the same.
// The gradient of input pixel `pixel` ((n * h + iy) * w + ix), channels c0..c0+VEC, into acc.
template <typename T, int VEC, bool kFew, bool kEager = false>
RN50_HD inline void gather_pixel(const PoolPlan& p, int pixel, int64_t c0, const T* __restrict__ dy,
                                 const uint8_t* __restrict__ positions, float (&acc)[VEC]) {
  const PoolShape& s = p.s;
  int ix, iy;
  const int n = divmod(p.in_h, divmod(p.in_w, pixel, ix), iy);
  const Cover rows = cover_of(iy, s.kh, s.ph, p.oh, p.stride_h);
  const Cover cols = cover_of(ix, s.kw, s.pw, p.ow, p.stride_w);
  const int64_t image = static_cast<int64_t>(n) * p.oh * p.ow;
  RN50_UNROLL
  for (int l = 0; l < VEC; ++l) acc[l] = 0.0f;
  if constexpr (kFew) {
    constexpr int M = kFewCovers;
    Positions<VEC> pos[M * M]{};
    Pack<T, VEC> g[M * M]{};
    int position[M * M];
    bool hit[M * M];
    RN50_UNROLL
    for (int j = 0; j < M * M; ++j) {
      const int oy = rows.begin + j / M, ox = cols.begin + j % M;
      hit[j] = oy < rows.end && ox < cols.end;
      position[j] = (iy - (oy * s.sh - s.ph)) * s.kw + (ix - (ox * s.sw - s.pw));
      const int64_t at = (image + static_cast<int64_t>(oy) * p.ow + ox) * s.c + c0;
      if (hit[j]) pos[j] = load_positions<VEC>(positions + at);
      if (kEager && hit[j]) g[j] = load_pack<T, VEC>(dy + at);
    }
    RN50_UNROLL
    for (int j = 0; j < M * M; ++j) {
      hit[j] = hit[j] && any_hit(pos[j], position[j]);
      const int oy = rows.begin + j / M, ox = cols.begin + j % M;
      if (!kEager && hit[j]) g[j] = load_pack<T, VEC>(dy + (image + static_cast<int64_t>(oy) * p.ow + ox) * s.c + c0);
    }
    RN50_UNROLL
    for (int j = 0; j < M * M; ++j) {
      if (!hit[j]) continue;
      float f[VEC];
      unpack(g[j], f);
      add_hits(pos[j], position[j], f, acc);
    }
  } else {
    for (int oy = rows.begin; oy < rows.end; ++oy) {
      for (int ox = cols.begin; ox < cols.end; ++ox) {
        const int64_t at = (image + static_cast<int64_t>(oy) * p.ow + ox) * s.c + c0;
        const Positions<VEC> pos = load_positions<VEC>(positions + at);
        const int position = (iy - (oy * s.sh - s.ph)) * s.kw + (ix - (ox * s.sw - s.pw));
        if (!any_hit(pos, position)) continue;
        float f[VEC];
        impl::load<T, VEC>(dy + at, f);
        add_hits(pos, position, f, acc);
      }
    }
  }
}

template <typename T, int VEC, bool kFew, bool kEager = false>
RN50_HD inline void backward_item(const PoolPlan& p, int item, const T* __restrict__ dy,
                                  const uint8_t* __restrict__ positions, T* __restrict__ dx) {
  int v;
  const int pixel = divmod(p.vectors, item, v);
  const int64_t c0 = static_cast<int64_t>(v) * VEC;
  float acc[VEC];
  gather_pixel<T, VEC, kFew, kEager>(p, pixel, c0, dy, positions, acc);
  impl::store<T, VEC>(dx + static_cast<int64_t>(pixel) * p.s.c + c0, acc);
}

// ---- backward by output blocks (PoolPlan::two_by_two: 3x3 windows, stride 2, padding 1) ----------------------------

// Output item `item` (pixel and channel vector, as the forward's) split into its coordinates.
struct OutputItem {
  int pixel, n, oy, ox;
  int64_t c0;
};

template <int VEC>
RN50_HD inline OutputItem output_item(const PoolPlan& p, int item) {
  OutputItem o;
  int v;
  o.pixel = divmod(p.vectors, item, v);
  o.n = divmod(p.out_h, divmod(p.out_w, o.pixel, o.ox), o.oy);
  o.c0 = static_cast<int64_t>(v) * VEC;
  return o;
}

// Whether input i of output o's block, (2oy + i / 2, 2ox + i % 2), is inside the input, and where its channel vector
// starts (`at`).
RN50_HD inline bool block_input(const PoolPlan& p, const OutputItem& o, int i, int64_t& at) {
  const int h = static_cast<int>(p.s.h), w = static_cast<int>(p.s.w);
  const int iy = 2 * o.oy + (i >> 1), ix = 2 * o.ox + (i & 1);
  at = ((static_cast<int64_t>(o.n) * h + iy) * w + ix) * p.s.c + o.c0;
  return iy < h && ix < w;
}

// Positions no window position equals: those of an output past the pool's last row or column.
template <int VEC>
RN50_HD inline Positions<VEC> no_positions() {
  Positions<VEC> pos;
  if constexpr (VEC == 8) {
    pos.r.x = pos.r.y = 0xffffffffu;
  } else if constexpr (VEC == 4) {
    pos.r = 0xffffffffu;
  } else {
    pos.r = 0xff;
  }
  return pos;
}

// The gradients of the 2x2 block of inputs of output item o (pixel (n * oh + oy) * ow + ox, channels c0..c0+VEC):
// acc[dy * 2 + dx] for input (2oy + dy, 2ox + dx), each summed in float from zero over the outputs covering it in
// row-major order (gather_pixel's sums, bit for bit). Output (oy + ey, ox + ex) covers it where ey <= dy and ex <= dx,
// at window position (dy - 2ey + 1) * 3 + (dx - 2ex + 1); `x`'s four inputs (where inside) are loaded with the
// gradients, into xs, so that one memory round trip serves the whole block.
template <typename T, int VEC>
RN50_HD inline void gather_block(const PoolPlan& p, const OutputItem& o, const T* __restrict__ dy,
                                 const uint8_t* __restrict__ positions, float (&acc)[4][VEC],
                                 const T* __restrict__ x = nullptr, Pack<T, VEC> (*xs)[4] = nullptr) {
  Positions<VEC> pos[4];
  Pack<T, VEC> g[4]{};
  const bool down = o.oy + 1 < p.oh, right = o.ox + 1 < p.ow;
  RN50_UNROLL
  for (int j = 0; j < 4; ++j) {
    const int ey = j >> 1, ex = j & 1;
    pos[j] = no_positions<VEC>();
    if ((ey == 0 || down) && (ex == 0 || right)) {
      const int64_t at = (static_cast<int64_t>(o.pixel) + ey * p.ow + ex) * p.s.c + o.c0;
      pos[j] = load_positions<VEC>(positions + at);
      g[j] = load_pack<T, VEC>(dy + at);
    }
  }
  if (xs != nullptr) {
    RN50_UNROLL
    for (int i = 0; i < 4; ++i) {
      int64_t at;
      if (block_input(p, o, i, at)) (*xs)[i] = load_pack<T, VEC>(x + at);
    }
  }
  float f[4][VEC];
  RN50_UNROLL
  for (int j = 0; j < 4; ++j) unpack(g[j], f[j]);
  RN50_UNROLL
  for (int i = 0; i < 4; ++i) {
    const int dy_ = i >> 1, dx_ = i & 1;
    RN50_UNROLL
    for (int l = 0; l < VEC; ++l) acc[i][l] = 0.0f;
    RN50_UNROLL
    for (int j = 0; j < 4; ++j) {
      const int ey = j >> 1, ex = j & 1;
      if (ey <= dy_ && ex <= dx_) add_hits(pos[j], (dy_ - 2 * ey + 1) * 3 + (dx_ - 2 * ex + 1), f[j], acc[i]);
    }
  }
}

// max_pool_backward by output blocks: the block's four input gradients rounded to T (those inside the input).
template <typename T, int VEC>
RN50_HD inline void backward_block_item(const PoolPlan& p, int item, const T* __restrict__ dy,
                                        const uint8_t* __restrict__ positions, T* __restrict__ dx) {
  const OutputItem o = output_item<VEC>(p, item);
  float acc[4][VEC];
  gather_block<T, VEC>(p, o, dy, positions, acc);
  RN50_UNROLL
  for (int i = 0; i < 4; ++i) {
    int64_t at;
    if (block_input(p, o, i, at)) impl::store<T, VEC>(dx + at, acc[i]);
  }
}

// batch_norm_backward_pooled's dx by output blocks: each input's gathered gradient rounded to T (as PoolGatherGrad
// hands it over), then impl::dx_of with its x, as impl::dx_rows_from computes a row, bit for bit.
template <typename T, int VEC>
RN50_HD inline void dx_block_item(const PoolPlan& p, const OutputItem& o, const T* __restrict__ dy,
                                  const uint8_t* __restrict__ positions, const T* __restrict__ x,
                                  const impl::DxLanes<VEC>& lanes, T* __restrict__ dx) {
  float acc[4][VEC];
  Pack<T, VEC> xs[4]{};
  gather_block<T, VEC>(p, o, dy, positions, acc, x, &xs);
  RN50_UNROLL
  for (int i = 0; i < 4; ++i) {
    int64_t at;
    if (!block_input(p, o, i, at)) continue;
    float g[VEC], f[VEC], result[VEC];
    unpack(impl::pack_of(acc[i], T{}), g);
    unpack(xs[i], f);
    RN50_UNROLL
    for (int k = 0; k < VEC; ++k) result[k] = impl::dx_of(lanes, k, g[k], f[k]);
    impl::store<T, VEC>(dx + at, result);
  }
}

// The pool's input gradient as BatchNorm's backward passes read it (impl::DenseGrad's interface): gathered from the
// pool's output gradient for each (row = input pixel, c0), rounded to T as max_pool_backward would have stored it, so
// that the sums are those of the two passes apart without the input-sized tensor between them. The unrolled path
// (kFew, gradients loaded with their positions) wherever the plan takes it.
template <typename T, int VEC, bool kFew>
struct PoolGatherGrad {
  PoolPlan plan;
  const T* dy;
  const uint8_t* positions;
  RN50_HD impl::Pack<T, VEC> load(int64_t row, int64_t c0) const {
    float acc[VEC];
    gather_pixel<T, VEC, kFew, kFew>(plan, static_cast<int>(row), c0, dy, positions, acc);
    return impl::pack_of(acc, T{});
  }
};

// The pool's output gradient where its position passes one, zero where it is kNoGradient, as BatchNorm's reduction
// over the pool's outputs reads it (impl::DenseGrad's interface; rows are output pixels): each output's gradient goes
// to one input, whose x the forward kept in x_at, so the sums of g and g * (x - mean) over the outputs are those over
// the inputs without gathering (in float and in another order: not bit for bit the two passes apart, which round
// each input's gradient to T first).
template <typename T, int VEC>
struct PoolMaskedGrad {
  const T* dy;
  const uint8_t* positions;
  int64_t channels;
  RN50_HD impl::Pack<T, VEC> load(int64_t row, int64_t c0) const {
    const int64_t at = row * channels + c0;
    const Positions<VEC> pos = load_positions<VEC>(positions + at);
    float g[VEC];
    impl::load<T, VEC>(dy + at, g);
    RN50_UNROLL
    for (int l = 0; l < VEC; ++l) {
      if (position_of(pos, l) == kNoGradient) g[l] = 0.0f;
    }
    return impl::pack_of(g, T{});
  }
};

// ---- a thread's share of a launch: a grid-stride loop over the work items -----------------------------------------

template <typename T, int VEC, bool kSmall, bool kNorm = false>
RN50_HD inline void forward_thread(const PoolPlan& p, int64_t first, int64_t step, const T* __restrict__ x,
                                   T* __restrict__ y, uint8_t* __restrict__ positions, const PoolNorm& norm = {},
                                   T* __restrict__ x_at = nullptr) {
  for (int64_t i = first; i < p.forward_items; i += step) {
    forward_item<T, VEC, kSmall, kNorm>(p, static_cast<int>(i), x, y, positions, norm, x_at);
  }
}

template <typename T, int VEC, bool kFew, bool kEager = false>
RN50_HD inline void backward_thread(const PoolPlan& p, int64_t first, int64_t step, const T* __restrict__ dy,
                                    const uint8_t* __restrict__ positions, T* __restrict__ dx) {
  for (int64_t i = first; i < p.backward_items; i += step) {
    backward_item<T, VEC, kFew, kEager>(p, static_cast<int>(i), dy, positions, dx);
  }
}

// PoolPlan::two_by_two: a thread's share of the output items, each writing its block of inputs.
template <typename T, int VEC>
RN50_HD inline void backward_block_thread(const PoolPlan& p, int64_t first, int64_t step, const T* __restrict__ dy,
                                          const uint8_t* __restrict__ positions, T* __restrict__ dx) {
  for (int64_t i = first; i < p.forward_items; i += step) {
    backward_block_item<T, VEC>(p, static_cast<int>(i), dy, positions, dx);
  }
}

// The same for batch_norm_backward_pooled's dx: items from the last to the first (the reduction before it ran first to
// last, so the pool's last gradients may still be in L2); a channel vector's coefficients loaded once while a thread's
// items stay in it (the step is a multiple of the vectors: always, for the stem's 64 channels).
template <typename T, int VEC>
RN50_HD inline void dx_block_thread(const PoolPlan& p, int64_t first, int64_t step, const T* __restrict__ dy,
                                    const uint8_t* __restrict__ positions, const T* __restrict__ x,
                                    const impl::DxCoefficients& co, T* __restrict__ dx) {
  const int64_t rows = p.s.n * p.s.h * p.s.w;
  impl::DxLanes<VEC> lanes{};
  int64_t lanes_c0 = -1;
  for (int64_t k = first; k < p.forward_items; k += step) {
    const OutputItem o = output_item<VEC>(p, static_cast<int>(p.forward_items - 1 - k));
    if (o.c0 != lanes_c0) {
      lanes = impl::dx_lanes<VEC>(co, o.c0, rows, false);
      lanes_c0 = o.c0;
    }
    dx_block_item<T, VEC>(p, o, dy, positions, x, lanes, dx);
  }
}

}  // namespace rn50::ops::kernels::pool_impl
