// tests/data/test_decode_budget.cpp: DecodeBudget: threads never hold more than it, one image above it goes ahead
// alone, callers are served in turn; the loader's threads take it with each image's decoded size.
#include "data/decode_budget.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <random>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "codecs/jpeg_codec.h"
#include "core/limits.h"
#include "data/image_folder.h"
#include "data/loader.h"
#include "tests/support/test_support.h"

namespace rn50::data {
namespace {

using namespace std::chrono_literals;

// Bytes in flight as the test itself counts them (after acquire, before the hold ends), and the most seen.
struct InFlight {
  std::atomic<uint64_t> bytes{0}, most{0};
  std::atomic<int> holders{0}, most_holders{0};
  void enter(uint64_t n) {
    const uint64_t now = bytes += n;
    for (uint64_t seen = most.load(); now > seen && !most.compare_exchange_weak(seen, now);) {
    }
    const int h = ++holders;
    for (int seen = most_holders.load(); h > seen && !most_holders.compare_exchange_weak(seen, h);) {
    }
  }
  void leave(uint64_t n) {
    bytes -= n;
    --holders;
  }
};

TEST(DecodeBudget, SixteenThreadsNeverHoldMoreThanTheBudget) {
  const uint64_t capacity = 1000;
  DecodeBudget budget(capacity);
  InFlight counted;
  std::atomic<uint64_t> asked{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 16; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 rng(static_cast<unsigned>(t));
      for (int i = 0; i < 200; ++i) {
        const uint64_t bytes = 1 + rng() % 400;  // each fits; sixteen at once do not
        asked += bytes;
        const DecodeBudget::Hold hold = budget.acquire(bytes);
        counted.enter(bytes);
        std::this_thread::sleep_for(std::chrono::microseconds(rng() % 200));
        counted.leave(bytes);
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_GT(asked.load(), 100 * capacity);
  EXPECT_LE(counted.most.load(), capacity);
  EXPECT_LE(budget.peak_in_flight(), capacity);
  EXPECT_GE(counted.most_holders.load(), 2);  // it held several at once, not one after another
  EXPECT_EQ(budget.in_flight(), 0u);          // every hold gave its bytes back
}

TEST(DecodeBudget, AnImageAboveTheBudgetGoesAheadAloneAndNothingWaitsForever) {
  DecodeBudget budget(100);
  std::atomic<bool> small_done{false};
  {
    DecodeBudget::Hold big = budget.acquire(1000);  // nothing in flight: it goes ahead
    EXPECT_EQ(budget.in_flight(), 1000u);
    std::thread small([&] {
      const DecodeBudget::Hold hold = budget.acquire(10);
      small_done = true;
    });
    std::this_thread::sleep_for(50ms);
    EXPECT_FALSE(small_done.load());            // not beside it
    DecodeBudget::Hold moved = std::move(big);  // the bytes go with the move, once
    moved = DecodeBudget::Hold();               // and back on assignment
    small.join();
  }
  EXPECT_TRUE(small_done.load());
  EXPECT_EQ(budget.in_flight(), 0u);
  EXPECT_EQ(budget.peak_in_flight(), 1000u);
  const DecodeBudget::Hold none = budget.acquire(0);  // nothing to hold, nothing to wait for
  EXPECT_EQ(budget.in_flight(), 0u);
}

// A large image waiting for room is not passed by the small ones that come after it.
TEST(DecodeBudget, TakesItsCallersInTurn) {
  DecodeBudget budget(100);
  auto first = std::make_unique<DecodeBudget::Hold>(budget.acquire(60));
  std::atomic<int> order{0}, large_at{-1}, small_at{-1};
  // Waits (at most 10 s) until `n` calls wait in the budget: the order is then fixed, however slow the machine.
  const auto wait_for_waiting = [&](uint64_t n) {
    for (int i = 0; i < 10000 && budget.waiting() < n; ++i) std::this_thread::sleep_for(1ms);
    EXPECT_EQ(budget.waiting(), n);
  };
  std::thread large([&] {
    // 95: the small one cannot fit beside it either, so it cannot count itself before the large one does.
    const DecodeBudget::Hold hold = budget.acquire(95);
    large_at = order++;
    std::this_thread::sleep_for(20ms);
  });
  wait_for_waiting(1);  // the large one waits first
  std::thread small([&] {
    const DecodeBudget::Hold hold = budget.acquire(10);  // would fit beside the first hold
    small_at = order++;
  });
  wait_for_waiting(2);
  std::this_thread::sleep_for(20ms);
  EXPECT_EQ(small_at.load(), -1);
  first.reset();
  large.join();
  small.join();
  EXPECT_EQ(large_at.load(), 0);
  EXPECT_EQ(small_at.load(), 1);
  EXPECT_EQ(budget.waiting(), 0u);
}

// Holds its image's "decoded size" (index-dependent) of the loader's budget while it "decodes", counted by the test.
class BudgetedDataset final : public ImageDataset {
 public:
  BudgetedDataset(size_t n, InFlight& counted) : n_(n), counted_(counted) {}
  static uint64_t decoded_bytes(size_t index) { return 100 + 37 * (index % 11); }
  size_t size() const override { return n_; }
  int64_t label(size_t index) const override { return static_cast<int64_t>(index % 3); }
  std::string describe(size_t index) const override { return "budgeted/" + std::to_string(index); }
  void load(size_t index, uint64_t, uint8_t* out, WorkerScratch& scratch) const override {
    ASSERT_NE(scratch.budget, nullptr);
    const DecodeBudget::Hold hold = scratch.budget->acquire(decoded_bytes(index));
    counted_.enter(decoded_bytes(index));
    std::this_thread::sleep_for(std::chrono::microseconds(300));
    out[0] = static_cast<uint8_t>(index);
    counted_.leave(decoded_bytes(index));
  }

 private:
  size_t n_;
  InFlight& counted_;
};

std::vector<size_t> identity(size_t n) {
  std::vector<size_t> order(n);
  for (size_t i = 0; i < n; ++i) order[i] = i;
  return order;
}

// Every batch of an epoch through 16 workers; returns each position's first byte.
std::vector<uint8_t> drain(const ImageDataset& dataset, const std::shared_ptr<DecodeBudget>& budget, int image) {
  LoaderOptions o;
  o.batch_size = 16;
  o.workers = 16;
  o.decode_budget = budget;
  BatchPool pool(3, 16, image, std::shared_ptr<HostAllocator>(make_pageable_allocator()));
  BatchLoader loader(dataset, identity(dataset.size()), 0, o, pool, nullptr);
  std::vector<uint8_t> first;
  const size_t bytes = static_cast<size_t>(image) * image * 3;
  while (std::optional<HostBatch> batch = loader.next()) {
    for (int64_t i = 0; i < batch->size; ++i) first.push_back(batch->images[static_cast<size_t>(i) * bytes]);
    loader.release(*batch);
  }
  return first;
}

TEST(DecodeBudget, SixteenLoaderThreadsHoldTheirImagesDecodedSizesWithinIt) {
  InFlight counted;
  const BudgetedDataset dataset(320, counted);
  uint64_t total = 0;
  for (size_t i = 0; i < dataset.size(); ++i) total += BudgetedDataset::decoded_bytes(i);
  const auto budget = std::make_shared<DecodeBudget>(1000);
  const std::vector<uint8_t> first = drain(dataset, budget, 4);
  ASSERT_EQ(first.size(), dataset.size());
  for (size_t i = 0; i < first.size(); ++i) EXPECT_EQ(first[i], static_cast<uint8_t>(i));
  EXPECT_GT(total, 50 * budget->capacity());
  EXPECT_LE(counted.most.load(), budget->capacity());
  EXPECT_GE(counted.most_holders.load(), 2);
  // A budget below every image: one at a time, and the epoch still ends.
  InFlight alone;
  const BudgetedDataset one_by_one(64, alone);
  EXPECT_EQ(drain(one_by_one, std::make_shared<DecodeBudget>(10), 4).size(), 64u);
  EXPECT_EQ(alone.most_holders.load(), 1);
}

// The JPEG dataset takes each image's decoded size from its header before decoding: progressive files hold libjpeg's
// coefficients of the whole image (here 6 MB each), whatever the output size.
TEST(DecodeBudget, JpegSamplesHoldTheirDecodedBytesWhileTheyDecode) {
  test::TempDir tmp;
  const std::vector<uint8_t> pixels = test::smooth_image(1000, 1000, 0.2);
  const std::vector<uint8_t> progressive = codecs::encode_jpeg(pixels.data(), 1000, 1000, 3, 80, true);
  for (int i = 0; i < 32; ++i)
    test::write_bytes(tmp.path() / "train" / "c" / (std::to_string(i) + ".JPEG"), progressive);
  SampleTransform t;
  t.image_size = 32;
  const JpegFolderDataset dataset(scan_image_folder((tmp.path() / "train").string()), t);
  const codecs::JpegInfo info = codecs::read_jpeg_header(progressive.data(), progressive.size());
  const uint64_t each = codecs::decode_memory_bytes(info, {0, 0, 1000, 1000}, 32, 32);
  EXPECT_GE(each, uint64_t{6000000});
  const auto budget = std::make_shared<DecodeBudget>(2 * each + each / 2);  // two at a time, not sixteen
  EXPECT_EQ(drain(dataset, budget, 32).size(), 32u);
  EXPECT_GE(budget->peak_in_flight(), each / 2);
  EXPECT_LE(budget->peak_in_flight(), budget->capacity());
  EXPECT_EQ(budget->in_flight(), 0u);
}

// The GPU path's loader threads decode nothing but an arithmetic-coded file's scans (at 1/8 scale, a progressive file's
// coefficients of the whole image with them): that check waits for its bytes of the budget as a CPU decode does, while
// a Huffman-coded file is read without waiting.
TEST(DecodeBudget, TheGpuPathsArithmeticCheckWaitsForItsBytes) {
  test::TempDir tmp;
  const std::vector<uint8_t> pixels = test::smooth_image(512, 512, 0.3);
  test::write_bytes(tmp.path() / "train" / "c" / "0.JPEG", codecs::encode_jpeg(pixels.data(), 512, 512, 3, 80, true));
  test::write_bytes(tmp.path() / "train" / "c" / "1.JPEG",
                    codecs::encode_jpeg(pixels.data(), 512, 512, 3, 80, /*progressive=*/true, /*arithmetic=*/true));
  const JpegFolderDataset dataset(scan_image_folder((tmp.path() / "train").string()), SampleTransform{});
  DecodeBudget budget(1000);
  auto held = std::make_unique<DecodeBudget::Hold>(budget.acquire(1));  // another thread's image in flight
  EncodedSample huffman;
  dataset.load_encoded(0, 0, huffman, &budget);  // no wait
  std::atomic<bool> checked{false};
  std::thread loader([&] {
    EncodedSample arithmetic;
    dataset.load_encoded(1, 0, arithmetic, &budget);
    checked = true;
  });
  std::this_thread::sleep_for(200ms);
  EXPECT_FALSE(checked.load());  // 512x512x3 coefficients of 2 bytes do not fit beside the byte held
  held.reset();
  loader.join();
  EXPECT_TRUE(checked.load());
  EXPECT_GE(budget.peak_in_flight(), uint64_t{512} * 512 * 3 * 2);
  EXPECT_EQ(budget.in_flight(), 0u);
}

// decode_memory_mb where it is set, per process; otherwise a quarter of the memory (a 6 GiB container: 1.5 GiB), shared
// by the processes of a launch on the host (two ranks: 768 MiB each), 16 GiB taken where the memory is unknown.
TEST(DecodeBudget, TheBudgetIsTheConfiguredOneOrAShareOfAQuarterOfTheMemory) {
  constexpr uint64_t kMiB = uint64_t{1} << 20, kGiB = uint64_t{1} << 30;
  EXPECT_EQ(decode_budget_bytes(0, 6 * kGiB, 1), 1536 * kMiB);
  EXPECT_EQ(decode_budget_bytes(0, 6 * kGiB, 2), 768 * kMiB);
  EXPECT_EQ(decode_budget_bytes(0, 6 * kGiB, 8), 192 * kMiB);
  EXPECT_EQ(decode_budget_bytes(0, 0, 1), 4 * kGiB);
  EXPECT_EQ(decode_budget_bytes(0, 0, 4), kGiB);
  EXPECT_EQ(decode_budget_bytes(0, 6 * kGiB, 0), 1536 * kMiB);  // no count read as one process
  EXPECT_EQ(decode_budget_bytes(3 * kMiB, 6 * kGiB, 1), 3 * kMiB);
  EXPECT_EQ(decode_budget_bytes(3 * kMiB, 6 * kGiB, 8), 3 * kMiB);  // configured: each process's own
  EXPECT_EQ(decode_budget_bytes(3 * kMiB, 0, 1), 3 * kMiB);
}

// This process's memory: its cgroup's limit where that is below the machine's, else the machine's.
TEST(DecodeBudget, ProcessMemoryIsTheCgroupLimitOrTheMachines) {
  const ProcessMemory memory = process_memory();
  const uint64_t machine = physical_memory_bytes();
  ASSERT_GT(machine, 0u);
  if (memory.cgroup) {
    EXPECT_LT(memory.bytes, machine);
    EXPECT_EQ(memory.bytes, *read_cgroup_limits().memory_bytes);
  } else {
    EXPECT_EQ(memory.bytes, machine);
  }
}

}  // namespace
}  // namespace rn50::data
