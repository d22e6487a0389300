// ops/max_pool_geometry.h: a max-pool's shape, the cases rn50's max-pool kernels take, and how they split the work
// (plain C++, no CUDA: the dispatch of every build, the kernels and the host tests share it).
#pragma once

#include <cstdint>
#include <string>

#include "cuda/launch.h"

namespace rn50::ops::kernels {

// torch's max_pool2d(kernel (kh, kw), stride (sh, sw), padding (ph, pw)) with dilation 1 and ceil_mode false, on an
// input [n, c, h, w] in channels-last memory: element (n, c, y, x) at ((n * h + y) * w + x) * c + c.
struct PoolShape {
  int64_t n = 0, c = 0, h = 0, w = 0;
  int kh = 1, kw = 1, sh = 1, sw = 1, ph = 0, pw = 0;
};

inline constexpr int kMaxPoolWindow = 256;               // a window's positions must fit the one byte kept per output
// bn_relu_max_pool's position of an output that passes no gradient back: its max, after ReLU, is zero (or NaN). No
// window position equals it: that op takes windows of at most kNoGradient elements.
inline constexpr int kNoGradient = 255;
inline constexpr int64_t kMaxPoolElements = 2147483647;  // the kernels index in 32 bits
inline constexpr int kSmallWindow = 3;                   // the forward's unrolled path: windows up to 3x3
inline constexpr int kFewCovers = 2;                     // the backward's unrolled path: up to 2x2 outputs an input

// torch's output size without ceil_mode: floor((size + 2 * pad - kernel) / stride) + 1, and 0 where the padded input
// is smaller than the kernel (torch refuses that).
inline int64_t pool_output_size(int64_t size, int kernel, int stride, int pad) {
  const int64_t span = size + 2 * static_cast<int64_t>(pad) - kernel;
  return span < 0 ? 0 : span / stride + 1;
}

// Why the kernels do not take this shape (empty: they do). The first two are torch's own refusals: the dispatch hands
// such a call to ATen, which raises its error.
inline std::string pool_unsupported_reason(const PoolShape& s) {
  if (s.kh < 1 || s.kw < 1 || s.sh < 1 || s.sw < 1 || s.ph < 0 || s.pw < 0) return "an invalid window";
  if (2 * s.ph > s.kh || 2 * s.pw > s.kw) return "padding over half the kernel";
  if (s.kh * s.kw > kMaxPoolWindow) return "a window of more than 256 elements (positions are one byte)";
  const int64_t oh = pool_output_size(s.h, s.kh, s.sh, s.ph), ow = pool_output_size(s.w, s.kw, s.sw, s.pw);
  if (s.n < 1 || s.c < 1 || s.h < 1 || s.w < 1 || oh < 1 || ow < 1) return "an empty input or output";
  if (s.n * s.c * s.h * s.w > kMaxPoolElements || s.n * s.c * oh * ow > kMaxPoolElements) {
    return "2^31 elements or more";
  }
  return "";
}

// Division of non-negative 32-bit ints by a divisor fixed for a launch, as a multiply and a shift (Granlund and
// Montgomery's round-up method): the kernels split every work item into pixel and channel coordinates, and a
// hardware-less integer division costs about twenty instructions. For d >= 2, n < 2^31: with l = ceil(log2 d) and
// mul = ceil(2^(31 + l) / d) (below 2^32), n / d = (n * mul) >> (31 + l) exactly; d == 1 is the identity.
struct FastDiv {
  int32_t d = 1;
  uint32_t mul = 0;
  int shift = 0;  // 31 + l - 32: applied to the high word of the 64-bit product
};

inline FastDiv make_fast_div(int32_t d) {
  FastDiv f;
  f.d = d;
  if (d <= 1) return f;
  int l = 0;
  while ((int64_t{1} << l) < d) ++l;
  const uint64_t p = uint64_t{1} << (31 + l);
  f.mul = static_cast<uint32_t>((p + static_cast<uint64_t>(d) - 1) / static_cast<uint64_t>(d));
  f.shift = l - 1;
  return f;
}

// How the kernels split a pool: one thread per output pixel and channel vector forward (its window read, its max and
// position written), one per input pixel and channel vector backward (the outputs whose windows cover it read, its
// gradient written once).
struct PoolPlan {
  PoolShape s;
  int oh = 0, ow = 0;
  int vec = 1;                // channels a thread covers: 16 bytes' worth, or 1 (channels no multiple, misaligned)
  bool small_window = false;  // kh, kw <= kSmallWindow: the forward loads the whole window before comparing
  bool few_covers = false;    // at most kFewCovers^2 outputs cover an input: the backward loads their positions first
  // few_covers: their gradients too, in the same round trip, before knowing which point at the input (one memory
  // latency a thread instead of two; gradients no lane takes are read too, mostly from cache, as neighbours share
  // them): 0.430 against 0.456 ms at batch 256 on an H200 (rn50_bench_max_pool, 2026-12-05). false: each gradient
  // only once its position says it is needed.
  bool gradients_with_positions = true;
  // 3x3 windows, stride 2, padding 1 (the stem's): the backward runs a thread per output pixel and channel vector,
  // which writes the 2x2 block of inputs (2oy + dy, 2ox + dx): only outputs (oy + ey, ox + ex), ey <= dy, ex <= dx,
  // cover them, so each of those four outputs is read once for four inputs and every position compared is a constant
  // (a thread per input spent its time on index arithmetic: 0.60 ms at 48% of DRAM bandwidth on an H100 inside
  // BatchNorm's backward, issue-bound).
  bool two_by_two = false;
  int forward_items = 0, backward_items = 0;  // output (input) pixels times channel vectors
  int forward_blocks = 1, backward_blocks = 1;
  FastDiv vectors, out_w, out_h, in_w, in_h, stride_h, stride_w;
};

// The plan for a shape pool_unsupported_reason takes, elements of `elem_bytes`; `aligned16`: every tensor pointer of
// the launch is 16-byte aligned (vector loads need it, besides the channels being a multiple of 16 bytes' worth).
inline PoolPlan make_pool_plan(const PoolShape& s, int elem_bytes, bool aligned16) {
  PoolPlan p;
  p.s = s;
  p.oh = static_cast<int>(pool_output_size(s.h, s.kh, s.sh, s.ph));
  p.ow = static_cast<int>(pool_output_size(s.w, s.kw, s.sw, s.pw));
  const int wide = cuda::launch::kVectorBytes / elem_bytes;
  p.vec = (aligned16 && s.c % wide == 0) ? wide : 1;
  p.small_window = s.kh <= kSmallWindow && s.kw <= kSmallWindow;
  const auto covers = [](int kernel, int stride) { return (kernel + stride - 1) / stride; };
  p.few_covers = covers(s.kh, s.sh) <= kFewCovers && covers(s.kw, s.sw) <= kFewCovers;
  p.two_by_two = s.kh == 3 && s.kw == 3 && s.sh == 2 && s.sw == 2 && s.ph == 1 && s.pw == 1;
  const int64_t vectors = s.c / p.vec;
  p.forward_items = static_cast<int>(s.n * p.oh * p.ow * vectors);
  p.backward_items = static_cast<int>(s.n * s.h * s.w * vectors);
  p.forward_blocks = cuda::launch::blocks_for(p.forward_items);
  p.backward_blocks = cuda::launch::blocks_for(p.backward_items);
  p.vectors = make_fast_div(static_cast<int32_t>(vectors));
  p.out_w = make_fast_div(p.ow);
  p.out_h = make_fast_div(p.oh);
  p.in_w = make_fast_div(static_cast<int32_t>(s.w));
  p.in_h = make_fast_div(static_cast<int32_t>(s.h));
  p.stride_h = make_fast_div(s.sh);
  p.stride_w = make_fast_div(s.sw);
  return p;
}

}  // namespace rn50::ops::kernels
