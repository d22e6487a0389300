// tests/ops/test_weight_cast_kernels_host.cpp: the multi-tensor cast emulated on the host (every thread of every
// block of each launch running the kernel's per-thread code) against casting each element alone, on fresh random
// tensors of awkward sizes (tails shorter than a vector, a chunk and one more element, more tensors than one list
// holds), aligned and misaligned; the lists themselves. Needs the CUDA headers (half and bfloat16 types), no GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "ops/weight_cast_kernels_impl.cuh"

namespace rn50::ops::kernels {
namespace {

template <typename From, typename To>
void emulate(const CastList& l) {
  for (int64_t block = 0; block < l.first_chunk[l.count]; ++block) {
    for (int thread = 0; thread < cast_impl::kThreads; ++thread) {
      if (l.vec == cast_impl::kVector) {
        cast_impl::cast_thread<From, To, cast_impl::kVector>(l, block, thread);
      } else {
        cast_impl::cast_thread<From, To, 1>(l, block, thread);
      }
    }
  }
}

template <typename T>
uint16_t bits(T v) {
  uint16_t b;
  std::memcpy(&b, &v, 2);
  return b;
}

// One element alone: CUDA's round-to-nearest-even conversions, the ones ATen's casts use.
uint16_t reference_bits(float v, __half) { return bits(__float2half_rn(v)); }
uint16_t reference_bits(float v, __nv_bfloat16) { return bits(__float2bfloat16_rn(v)); }

// Sizes that end inside a vector, at a vector's end, inside and at the end of a chunk, and past several chunks.
const std::vector<int64_t> kSizes = {
    1, 7, 8, 9, 63, 4096, kCastChunk - 1, kCastChunk, kCastChunk + 1, 3 * kCastChunk + 5};

// Values with every float16 hazard: ties to even, subnormals, overflow to infinity, NaN, signed zeros.
std::vector<float> awkward_floats(int64_t n, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.f, 3.f);
  std::uniform_int_distribution<int> pick(0, 9);
  // 1 + 1/2048 lies halfway between two float16 values; 65520 rounds up to infinity.
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  const float specials[] = {0.f, -0.f, 1e-7f, -3e-8f, 65504.f, 65520.f, 1e6f, -1e6f, inf, nan, 1.f + 1.f / 2048.f};
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = pick(rng) == 0 ? specials[rng() % (sizeof(specials) / sizeof(float))] : normal(rng);
  return v;
}

template <typename Low>
void check_both_ways(size_t offset_elements) {
  std::mt19937 rng(1234 + static_cast<unsigned>(offset_elements));
  // More tensors than one list holds: every size several times, in a shuffled order.
  std::vector<int64_t> sizes;
  for (int r = 0; r < 7; ++r) sizes.insert(sizes.end(), kSizes.begin(), kSizes.end());
  std::shuffle(sizes.begin(), sizes.end(), rng);
  ASSERT_GT(sizes.size(), static_cast<size_t>(kCastListMax));
  // Each tensor in its own buffer with room to shift it off 16-byte alignment by `offset_elements`.
  std::vector<std::vector<float>> wide(sizes.size()), back(sizes.size());
  std::vector<std::vector<Low>> low(sizes.size());
  std::vector<CastItem> down, up;
  for (size_t i = 0; i < sizes.size(); ++i) {
    const std::vector<float> values = awkward_floats(sizes[i], rng);
    wide[i].assign(static_cast<size_t>(sizes[i]) + offset_elements + 8, 0.f);
    back[i].assign(wide[i].size(), -1.f);
    low[i].resize(wide[i].size());
    std::copy(values.begin(), values.end(), wide[i].begin() + static_cast<std::ptrdiff_t>(offset_elements));
    down.push_back({wide[i].data() + offset_elements, low[i].data() + offset_elements, sizes[i]});
    up.push_back({low[i].data() + offset_elements, back[i].data() + offset_elements, sizes[i]});
  }
  const std::vector<CastList> down_lists = make_cast_lists(down), up_lists = make_cast_lists(up);
  ASSERT_EQ(down_lists.size(), (sizes.size() + kCastListMax - 1) / kCastListMax);
  for (const CastList& l : down_lists) emulate<float, Low>(l);
  for (const CastList& l : up_lists) emulate<Low, float>(l);
  for (size_t i = 0; i < sizes.size(); ++i) {
    for (int64_t j = 0; j < sizes[i]; ++j) {
      const size_t at = offset_elements + static_cast<size_t>(j);
      const float x = wide[i][at];
      ASSERT_EQ(bits(low[i][at]), reference_bits(x, Low{})) << "tensor " << i << " element " << j << " of " << x;
      const float widened = impl::to_float(low[i][at]);  // exact: every float16 and bfloat16 is a float
      if (std::isnan(widened)) {
        ASSERT_TRUE(std::isnan(back[i][at]));
      } else {
        ASSERT_EQ(std::memcmp(&back[i][at], &widened, sizeof(float)), 0) << "tensor " << i << " element " << j;
      }
    }
    // Nothing written outside the tensor.
    for (size_t at = 0; at < offset_elements; ++at) ASSERT_EQ(back[i][at], -1.f);
    for (size_t at = offset_elements + static_cast<size_t>(sizes[i]); at < back[i].size(); ++at) {
      ASSERT_EQ(back[i][at], -1.f);
    }
  }
}

TEST(WeightCastKernels, EveryElementOfEveryTensorConvertsAsAloneBothWays) {
  check_both_ways<__half>(0);
  check_both_ways<__nv_bfloat16>(0);
}

TEST(WeightCastKernels, MisalignedTensorsTakeTheElementWisePath) {
  check_both_ways<__half>(1);
  check_both_ways<__nv_bfloat16>(3);
}

TEST(WeightCastKernels, ListsCoverEachTensorWithItsChunksAndVectorOnlyWhenAligned) {
  alignas(16) static float a[64];
  alignas(16) static __half b[64];
  const std::vector<CastList> aligned = make_cast_lists({{a, b, 20}, {a + 4, b + 8, kCastChunk + 1}});
  ASSERT_EQ(aligned.size(), 1u);
  EXPECT_EQ(aligned[0].count, 2);
  EXPECT_EQ(aligned[0].vec, 8);
  EXPECT_EQ(aligned[0].first_chunk[0], 0);
  EXPECT_EQ(aligned[0].first_chunk[1], 1);
  EXPECT_EQ(aligned[0].first_chunk[2], 3);
  EXPECT_EQ(cast_impl::tensor_of(aligned[0], 0), 0);
  EXPECT_EQ(cast_impl::tensor_of(aligned[0], 1), 1);
  EXPECT_EQ(cast_impl::tensor_of(aligned[0], 2), 1);
  // One pointer off 16 bytes (a float16 four elements in: 8 bytes) and the whole list goes element by element.
  EXPECT_EQ(make_cast_lists({{a, b, 20}, {a, b + 4, 20}})[0].vec, 1);
  EXPECT_TRUE(make_cast_lists({}).empty());
  std::vector<CastItem> many(2 * kCastListMax + 1, CastItem{a, b, 1});
  const std::vector<CastList> lists = make_cast_lists(many);
  ASSERT_EQ(lists.size(), 3u);
  EXPECT_EQ(lists[0].count, kCastListMax);
  EXPECT_EQ(lists[2].count, 1);
  EXPECT_EQ(lists[1].first_chunk[kCastListMax], kCastListMax);
}

}  // namespace
}  // namespace rn50::ops::kernels
