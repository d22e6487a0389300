// tests/data/test_loader.cpp: tests of BatchPool and BatchLoader: order, worker-count independence, drop_last,
// bad-sample replacement, strict mode, error propagation and prompt shutdown.
#include "data/loader.h"

#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <future>
#include <map>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "core/affinity.h"
#include "core/errors.h"
#include "samples/sample_maker.h"
#include "tests/support/test_support.h"

namespace rn50::data {
namespace {

constexpr int kImage = 4;  // fake images are tiny: 4 x 4 x 3
constexpr size_t kImageBytes = kImage * kImage * 3;

// Samples are byte patterns of (index, epoch); chosen indices fail like corrupt files or like a broken disk.
class FakeDataset final : public ImageDataset {
 public:
  explicit FakeDataset(size_t n) : n_(n) {}
  std::set<size_t> bad;     // DecodeError
  std::set<size_t> broken;  // std::runtime_error: not a bad sample, a real failure
  std::chrono::microseconds delay{0};
  // While set, each load notes the CPU it ran on.
  mutable std::atomic<bool> record_cpus{false};
  mutable std::mutex cpus_mutex;
  mutable std::set<int> cpus;
  mutable std::map<std::thread::id, std::set<int>> cpus_by_thread;

  size_t size() const override { return n_; }
  int64_t label(size_t index) const override { return static_cast<int64_t>(index % 7); }
  std::string describe(size_t index) const override { return "fake/" + std::to_string(index); }
  void load(size_t index, uint64_t epoch, uint8_t* out, WorkerScratch&) const override {
    if (delay.count() > 0) std::this_thread::sleep_for(delay);
    if (record_cpus.load()) {
      std::lock_guard<std::mutex> lock(cpus_mutex);
      cpus.insert(sched_getcpu());
      cpus_by_thread[std::this_thread::get_id()].insert(sched_getcpu());
    }
    if (bad.count(index) != 0) throw DecodeError("simulated corrupt data");
    if (broken.count(index) != 0) throw std::runtime_error("simulated disk failure");
    for (size_t k = 0; k < kImageBytes; ++k) out[k] = pixel(index, epoch, k);
  }
  static uint8_t pixel(size_t index, uint64_t epoch, size_t k) {
    return static_cast<uint8_t>(index * 131 + epoch * 7 + k);
  }

 private:
  size_t n_;
};

std::vector<size_t> identity(size_t n) {
  std::vector<size_t> order(n);
  for (size_t i = 0; i < n; ++i) order[i] = i;
  return order;
}

LoaderOptions options(int batch_size, int workers, bool drop_last = false) {
  LoaderOptions o;
  o.batch_size = batch_size;
  o.workers = workers;
  o.drop_last = drop_last;
  return o;
}

// Everything one epoch delivered, batch after batch.
struct Epoch {
  std::vector<int64_t> sizes;
  std::vector<int64_t> labels;
  std::vector<uint8_t> images;
};

Epoch drain(BatchLoader& loader, size_t image_bytes) {
  Epoch epoch;
  int64_t expected_index = 0;
  while (std::optional<HostBatch> batch = loader.next()) {
    EXPECT_EQ(batch->index, expected_index++);
    epoch.sizes.push_back(batch->size);
    epoch.labels.insert(epoch.labels.end(), batch->labels, batch->labels + batch->size);
    epoch.images.insert(epoch.images.end(), batch->images, batch->images + batch->size * image_bytes);
    loader.release(*batch);
  }
  EXPECT_EQ(expected_index, loader.num_batches());
  return epoch;
}

// Runs `fn` on another thread; if it has not finished after `seconds`, the test binary aborts rather than hang.
template <class Fn>
void within_seconds(double seconds, Fn fn) {
  std::promise<void> done;
  std::future<void> finished = done.get_future();
  std::thread runner([&] {
    try {
      fn();
      done.set_value();
    } catch (...) {
      done.set_exception(std::current_exception());
    }
  });
  if (finished.wait_for(std::chrono::duration<double>(seconds)) != std::future_status::ready) {
    std::fprintf(stderr, "timed out after %.1f s: the loader did not shut down\n", seconds);
    std::abort();
  }
  runner.join();
  finished.get();
}

std::shared_ptr<HostAllocator> pageable() { return make_pageable_allocator(); }

TEST(BatchPool, AllocatesAlignedSeparateSlots) {
  BatchPool pool(3, 5, 8, pageable());
  EXPECT_EQ(pool.slots(), 3);
  EXPECT_EQ(pool.batch_size(), 5);
  EXPECT_EQ(pool.image_size(), 8);
  EXPECT_FALSE(pool.pinned());
  std::set<void*> seen;
  for (int s = 0; s < 3; ++s) {
    EXPECT_EQ(reinterpret_cast<uintptr_t>(pool.images(s)) % 64, 0u);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(pool.labels(s)) % 64, 0u);
    seen.insert(pool.images(s));
    seen.insert(pool.labels(s));
    std::fill(pool.images(s), pool.images(s) + 5 * 8 * 8 * 3, static_cast<uint8_t>(s));  // writable, full size
  }
  EXPECT_EQ(seen.size(), 6u);
  EXPECT_THROW(BatchPool(0, 5, 8, pageable()), ConfigError);
}

TEST(BatchLoader, DeliversEveryPositionOnceInOrderWithAnyWorkerCount) {
  const size_t n = 103;
  FakeDataset dataset(n);
  const std::vector<size_t> order = epoch_order(n, 1, 2, true);
  std::vector<Epoch> results;
  for (int workers : {0, 1, 3}) {
    SCOPED_TRACE("workers " + std::to_string(workers));
    BatchPool pool(3, 8, kImage, pageable());
    BatchLoader loader(dataset, order, 2, options(8, workers), pool, nullptr);
    EXPECT_EQ(loader.num_batches(), 13);
    const Epoch epoch = drain(loader, kImageBytes);
    ASSERT_EQ(epoch.labels.size(), n);
    EXPECT_EQ(epoch.sizes.back(), 7);  // 103 = 12 * 8 + 7
    for (size_t p = 0; p < n; ++p) {
      EXPECT_EQ(epoch.labels[p], dataset.label(order[p]));
      for (size_t k = 0; k < kImageBytes; ++k)
        ASSERT_EQ(epoch.images[p * kImageBytes + k], FakeDataset::pixel(order[p], 2, k)) << "position " << p;
    }
    EXPECT_FALSE(loader.next().has_value());  // stays finished
    EXPECT_EQ(loader.bad_samples(), 0);
    results.push_back(epoch);
  }
  EXPECT_EQ(results[0].images, results[1].images);
  EXPECT_EQ(results[0].images, results[2].images);
}

// pin_first_cpu: worker k on usable CPU (first + k) mod count, from the constructor's return; the same samples;
// the caller's own mask untouched.
TEST(BatchLoader, PinnedWorkersRunOnTheirCpusAndDeliverTheSameSamples) {
  const std::vector<int> usable = usable_cpus();
  if (usable.size() < 2) GTEST_SKIP() << "one usable CPU: pinned and unpinned workers run on the same one";
  const size_t n = 64;
  FakeDataset dataset(n);
  dataset.delay = std::chrono::microseconds(200);
  const std::vector<size_t> order = epoch_order(n, 1, 0, true);
  BatchPool unpinned_pool(3, 8, kImage, pageable());
  BatchLoader unpinned(dataset, order, 0, options(8, 1), unpinned_pool, nullptr);
  EXPECT_EQ(unpinned.worker_threads(), 1);
  EXPECT_EQ(unpinned.pinned_workers(), 0);
  const Epoch reference = drain(unpinned, kImageBytes);
  for (int first : {0, 1}) {
    SCOPED_TRACE("pin_first_cpu " + std::to_string(first));
    LoaderOptions pinned_options = options(8, 1);
    pinned_options.pin_first_cpu = first;
    BatchPool pool(3, 8, kImage, pageable());
    dataset.cpus.clear();
    BatchLoader loader(dataset, order, 0, pinned_options, pool, nullptr);
    dataset.record_cpus = true;  // the constructor has pinned its worker: every load from here runs there
    EXPECT_EQ(loader.worker_threads(), 1);
    EXPECT_EQ(loader.pinned_workers(), 1);
    const Epoch epoch = drain(loader, kImageBytes);
    dataset.record_cpus = false;
    EXPECT_EQ(epoch.images, reference.images);
    EXPECT_EQ(dataset.cpus, std::set<int>{usable[static_cast<size_t>(first) % usable.size()]});
    EXPECT_EQ(usable_cpus(), usable);
  }
  // Two workers from the last CPU: one on it, the other on the first (cycling); each stays on its own.
  LoaderOptions two = options(8, 2);
  two.pin_first_cpu = static_cast<int>(usable.size()) - 1;
  BatchPool two_pool(3, 8, kImage, pageable());
  dataset.cpus.clear();
  dataset.cpus_by_thread.clear();
  {
    BatchLoader loader(dataset, order, 0, two, two_pool, nullptr);
    dataset.record_cpus = true;
    EXPECT_EQ(loader.worker_threads(), 2);
    EXPECT_EQ(loader.pinned_workers(), 2);
    EXPECT_EQ(drain(loader, kImageBytes).images, reference.images);
    dataset.record_cpus = false;
  }
  EXPECT_EQ(usable_cpus(), usable);  // the workers pinned themselves, not this thread
  const std::set<int> allowed{usable.back(), usable.front()};
  for (const auto& [thread, cpus] : dataset.cpus_by_thread) {
    EXPECT_EQ(cpus.size(), 1u);
    for (int cpu : cpus) EXPECT_TRUE(allowed.count(cpu)) << cpu;
  }
  LoaderOptions wrong = options(8, 1);
  wrong.pin_first_cpu = -2;
  BatchPool pool(3, 8, kImage, pageable());
  EXPECT_THROW(BatchLoader(dataset, order, 0, wrong, pool, nullptr), ConfigError);
}

TEST(BatchLoader, DropLastDropsOnlyThePartialBatch) {
  FakeDataset dataset(103);
  for (int workers : {0, 2}) {
    BatchPool pool(2, 8, kImage, pageable());
    BatchLoader loader(dataset, identity(103), 0, options(8, workers, /*drop_last=*/true), pool, nullptr);
    EXPECT_EQ(loader.num_batches(), 12);
    const Epoch epoch = drain(loader, kImageBytes);
    EXPECT_EQ(epoch.sizes, std::vector<int64_t>(12, 8));
  }
  FakeDataset exact(96);
  BatchPool pool(2, 8, kImage, pageable());
  BatchLoader keep(exact, identity(96), 0, options(8, 1, /*drop_last=*/false), pool, nullptr);
  EXPECT_EQ(keep.num_batches(), 12);
  EXPECT_EQ(drain(keep, kImageBytes).sizes, std::vector<int64_t>(12, 8));
  BatchLoader empty(exact, {}, 0, options(8, 2), pool, nullptr);
  EXPECT_EQ(empty.num_batches(), 0);
  EXPECT_FALSE(empty.next().has_value());
}

TEST(BatchLoader, BadSamplesAreReportedCountedAndReplacedByTheNextPositions) {
  const size_t n = 60;
  FakeDataset dataset(n);
  dataset.bad = {5, 17, 18, 40};
  for (int workers : {0, 3}) {
    SCOPED_TRACE("workers " + std::to_string(workers));
    std::mutex mutex;
    std::multiset<std::string> reported;
    BatchPool pool(2, 6, kImage, pageable());
    BatchLoader loader(dataset, identity(n), 0, options(6, workers), pool,
                       [&](const std::string& what, const std::string& reason) {
                         std::lock_guard<std::mutex> lock(mutex);
                         reported.insert(what);
                         EXPECT_EQ(reason, "simulated corrupt data");
                       });
    const Epoch epoch = drain(loader, kImageBytes);
    EXPECT_EQ(loader.bad_samples(), 4);
    EXPECT_EQ(reported, (std::multiset<std::string>{"fake/5", "fake/17", "fake/18", "fake/40"}));
    ASSERT_EQ(epoch.labels.size(), n);
    // Position p holds the first good sample at p, p + 1, ...
    const std::vector<std::pair<size_t, size_t>> replaced = {{5, 6}, {17, 19}, {18, 19}, {40, 41}, {4, 4}};
    for (const auto& [position, sample] : replaced) {
      EXPECT_EQ(epoch.labels[position], dataset.label(sample));
      EXPECT_EQ(epoch.images[position * kImageBytes + 1], FakeDataset::pixel(sample, 0, 1));
    }
  }
  // The search wraps around the end of the order.
  FakeDataset tail(12);
  tail.bad = {11};
  BatchPool pool(1, 4, kImage, pageable());
  BatchLoader loader(tail, identity(12), 0, options(4, 0), pool, nullptr);
  const Epoch epoch = drain(loader, kImageBytes);
  EXPECT_EQ(epoch.images[11 * kImageBytes], FakeDataset::pixel(0, 0, 0));
}

// Validation's mode: a bad sample's position is left empty (zeros, kSkippedLabel), however many come in a row; a
// run of them once passed max_replacements and ended the run after a whole training epoch.
TEST(BatchLoader, WithoutReplacementBadSamplesAreLabelledSkippedInPlace) {
  const size_t n = 60;
  FakeDataset dataset(n);
  for (size_t i = 20; i < 50; ++i) dataset.bad.insert(i);
  dataset.bad.insert(3);
  for (int workers : {0, 3}) {
    SCOPED_TRACE("workers " + std::to_string(workers));
    LoaderOptions o = options(8, workers);
    o.replace_bad = false;
    o.max_replacements = 5;
    BatchPool pool(2, 8, kImage, pageable());
    std::atomic<int> reported{0};
    BatchLoader loader(dataset, identity(n), 0, o, pool, [&](const std::string&, const std::string&) { ++reported; });
    int64_t batches = 0;
    Epoch epoch;
    while (std::optional<HostBatch> batch = loader.next()) {
      EXPECT_TRUE(batch->skip_bad);
      epoch.labels.insert(epoch.labels.end(), batch->labels, batch->labels + batch->size);
      epoch.images.insert(epoch.images.end(), batch->images, batch->images + batch->size * kImageBytes);
      loader.release(*batch);
      ++batches;
    }
    EXPECT_EQ(batches, 8);  // 60 positions, the last batch short
    EXPECT_EQ(loader.bad_samples(), 31);
    EXPECT_EQ(reported.load(), 31);
    ASSERT_EQ(epoch.labels.size(), n);
    for (size_t p = 0; p < n; ++p) {
      const bool bad = dataset.bad.count(p) != 0;
      EXPECT_EQ(epoch.labels[p], bad ? kSkippedLabel : dataset.label(p)) << p;
      EXPECT_EQ(epoch.images[p * kImageBytes + 1], bad ? 0 : FakeDataset::pixel(p, 0, 1)) << p;
    }
  }
}

TEST(BatchLoader, StrictModeFailsAtTheBadSampleNamingIt) {
  FakeDataset dataset(40);
  dataset.bad = {9};
  for (int workers : {0, 2}) {
    SCOPED_TRACE("workers " + std::to_string(workers));
    LoaderOptions o = options(4, workers);
    o.strict = true;
    BatchPool pool(2, 4, kImage, pageable());
    int handled = 0;
    BatchLoader loader(dataset, identity(40), 0, o, pool, [&](const std::string&, const std::string&) { ++handled; });
    int delivered = 0;
    std::string message;
    try {
      while (std::optional<HostBatch> batch = loader.next()) {
        ++delivered;
        loader.release(*batch);
      }
    } catch (const DecodeError& e) {
      message = e.what();
    }
    EXPECT_EQ(delivered, 2);  // batches 0 and 1 are fine; position 9 is in batch 2
    EXPECT_NE(message.find("fake/9"), std::string::npos) << message;
    EXPECT_NE(message.find("simulated corrupt data"), std::string::npos) << message;
    EXPECT_EQ(handled, 0);                     // skipped it is not: no "bad sample skipped" line before the run stops
    EXPECT_THROW(loader.next(), DecodeError);  // and it stays failed
  }
}

TEST(BatchLoader, GivesUpAfterTooManyConsecutiveBadSamples) {
  FakeDataset dataset(100);
  for (size_t i = 30; i < 50; ++i) dataset.bad.insert(i);
  for (int workers : {0, 3}) {
    LoaderOptions o = options(10, workers);
    o.max_replacements = 5;
    BatchPool pool(2, 10, kImage, pageable());
    BatchLoader loader(dataset, identity(100), 0, o, pool, nullptr);
    std::string message;
    try {
      drain(loader, kImageBytes);
    } catch (const DecodeError& e) {
      message = e.what();
    }
    EXPECT_NE(message.find("too many consecutive bad samples"), std::string::npos) << message;
    EXPECT_NE(message.find("fake/30"), std::string::npos) << message;
  }
  // When every sample is bad, the search stops after one lap instead of spinning.
  FakeDataset hopeless(5);
  hopeless.bad = {0, 1, 2, 3, 4};
  BatchPool pool(1, 5, kImage, pageable());
  BatchLoader loader(hopeless, identity(5), 0, options(5, 0), pool, nullptr);
  EXPECT_THROW(loader.next(), DecodeError);
  EXPECT_EQ(loader.bad_samples(), 5);
}

TEST(BatchLoader, RethrowsAWorkersOtherErrors) {
  FakeDataset dataset(50);
  dataset.broken = {23};
  for (int workers : {0, 3}) {
    BatchPool pool(2, 5, kImage, pageable());
    BatchLoader loader(dataset, identity(50), 0, options(5, workers), pool, nullptr);
    int delivered = 0;
    try {
      while (std::optional<HostBatch> batch = loader.next()) {
        ++delivered;
        loader.release(*batch);
      }
      ADD_FAILURE() << "no error";
    } catch (const std::runtime_error& e) {
      EXPECT_STREQ(e.what(), "simulated disk failure");
    }
    EXPECT_EQ(delivered, 4);
    EXPECT_EQ(loader.bad_samples(), 0);
  }
}

TEST(BatchLoader, HoldingEverySlotThenAskingForMoreIsAnError) {
  FakeDataset dataset(40);
  for (int workers : {0, 2}) {
    BatchPool pool(2, 4, kImage, pageable());
    BatchLoader loader(dataset, identity(40), 0, options(4, workers), pool, nullptr);
    const HostBatch first = *loader.next();
    const HostBatch second = *loader.next();
    EXPECT_NE(first.slot, second.slot);
    EXPECT_THROW(loader.next(), std::logic_error);  // instead of waiting forever
    loader.release(first);
    EXPECT_THROW(loader.release(first), std::logic_error);  // released twice
    const HostBatch third = *loader.next();
    EXPECT_EQ(third.index, 2);
    EXPECT_EQ(third.slot, first.slot);
    EXPECT_EQ(third.images[0], FakeDataset::pixel(8, 0, 0));
  }
}

TEST(BatchLoader, StopsPromptlyWhenDestroyedMidEpoch) {
  FakeDataset dataset(5000);
  dataset.delay = std::chrono::microseconds(500);
  const std::vector<size_t> order = identity(5000);
  within_seconds(10, [&] {
    BatchPool pool(2, 16, kImage, pageable());
    {  // never asked for a batch
      BatchLoader loader(dataset, order, 0, options(16, 3), pool, nullptr);
    }
    {  // holds a batch (workers wait on a slot) while destroyed
      BatchLoader loader(dataset, order, 0, options(16, 3), pool, nullptr);
      const std::optional<HostBatch> held = loader.next();
      ASSERT_TRUE(held.has_value());
    }
    {  // consumed a few batches, workers busy decoding ahead
      BatchLoader loader(dataset, order, 0, options(16, 3), pool, nullptr);
      for (int i = 0; i < 3; ++i) loader.release(*loader.next());
    }
  });
}

// 18 generated JPEGs of 3 classes in `tmp`, as training samples of 24 x 24.
JpegFolderDataset generated_dataset(const test::TempDir& tmp, int classes = 3, int per_class = 6) {
  samples::SampleSpec spec;
  spec.out_dir = tmp.str();
  spec.classes = classes;
  spec.per_class = per_class;
  spec.val_per_class = 0;
  spec.size = 32;
  samples::make_sample_dataset(spec);
  SampleTransform transform;
  transform.image_size = 24;
  transform.seed = 5;
  return JpegFolderDataset(scan_image_folder((tmp.path() / "train").string()), transform);
}

TEST(BatchLoader, RealJpegFolderGivesTheSameBytesWithAnyWorkerCount) {
  test::TempDir tmp;
  const JpegFolderDataset dataset = generated_dataset(tmp);

  // Two of the files go bad: replaced and reported by path.
  const std::string truncated = dataset.describe(4), emptied = dataset.describe(11);
  const std::vector<uint8_t> bytes = test::read_bytes(truncated);
  test::write_bytes(truncated, std::vector<uint8_t>(bytes.begin(), bytes.begin() + bytes.size() / 2));
  test::write_bytes(emptied, {});

  const std::vector<size_t> order = epoch_order(dataset.size(), 5, 1, true);
  std::vector<Epoch> results;
  for (int workers : {0, 3}) {
    std::mutex mutex;
    std::set<std::string> reported;
    BatchPool pool(2, 4, 24, pageable());
    BatchLoader loader(dataset, order, 1, options(4, workers), pool, [&](const std::string& what, const std::string&) {
      std::lock_guard<std::mutex> lock(mutex);
      reported.insert(what);
    });
    results.push_back(drain(loader, 24 * 24 * 3));
    EXPECT_EQ(loader.bad_samples(), 2);
    EXPECT_EQ(reported, (std::set<std::string>{truncated, emptied}));
  }
  ASSERT_EQ(results[0].labels.size(), 18u);
  EXPECT_EQ(results[0].images, results[1].images);
  EXPECT_EQ(results[0].labels, results[1].labels);
}

// Encoded pools hand out the files' bytes with the CPU path's crops; bad files are counted and replaced exactly
// as in pixel pools, so both decode paths train on the same samples in the same order.
TEST(BatchLoader, EncodedBatchesCarryTheSamplesOfPixelBatches) {
  test::TempDir tmp;
  const JpegFolderDataset dataset = generated_dataset(tmp);
  const std::string truncated = dataset.describe(4), png = dataset.describe(11);
  const std::vector<uint8_t> bytes = test::read_bytes(truncated);
  test::write_bytes(truncated, std::vector<uint8_t>(bytes.begin(), bytes.begin() + bytes.size() / 2));
  test::write_bytes(png, {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n', 0, 0, 0, 13});

  const std::vector<size_t> order = epoch_order(dataset.size(), 5, 1, true);
  BatchPool pixel_pool(2, 4, 24, pageable());
  BatchLoader pixel_loader(dataset, order, 1, options(4, 2), pixel_pool, nullptr);
  const Epoch pixels = drain(pixel_loader, 24 * 24 * 3);
  for (int workers : {0, 3}) {
    BatchPool pool(3, 4, 24, pageable(), BatchContent::kEncoded);
    EXPECT_EQ(pool.images(0), nullptr);
    std::set<std::string> reported;
    std::mutex mutex;
    BatchLoader loader(dataset, order, 1, options(4, workers), pool, [&](const std::string& what, const std::string&) {
      std::lock_guard<std::mutex> lock(mutex);
      reported.insert(what);
    });
    std::vector<int64_t> labels;
    while (std::optional<HostBatch> batch = loader.next()) {
      ASSERT_NE(batch->encoded, nullptr);
      EXPECT_EQ(batch->images, nullptr);
      for (int64_t i = 0; i < batch->size; ++i) {
        const EncodedSample& sample = batch->encoded[i];
        labels.push_back(batch->labels[i]);
        EXPECT_EQ(batch->labels[i], dataset.label(sample.index));
        EXPECT_EQ(sample.bytes, test::read_bytes(dataset.describe(sample.index)));
        const SampleGeometry g =
            sample_geometry(dataset.transform(), sample.info.width, sample.info.height, 1, sample.index);
        EXPECT_EQ(sample.geometry.rect.x, g.rect.x);
        EXPECT_EQ(sample.geometry.rect.height, g.rect.height);
        EXPECT_EQ(sample.geometry.flip, g.flip);
      }
      loader.release(*batch);
    }
    EXPECT_EQ(loader.bad_samples(), 2);
    EXPECT_EQ(reported, (std::set<std::string>{truncated, png}));
    EXPECT_EQ(labels, pixels.labels);
  }
  // Without replacement the sample the loader could not read is marked skipped for the device decoder, which then
  // neither decodes nor reports it again.
  LoaderOptions o = options(4, 2);
  o.replace_bad = false;
  BatchPool pool(3, 4, 24, pageable(), BatchContent::kEncoded);
  BatchLoader loader(dataset, order, 1, o, pool, nullptr);
  std::set<size_t> skipped;
  while (std::optional<HostBatch> batch = loader.next()) {
    for (int64_t i = 0; i < batch->size; ++i) {
      const EncodedSample& sample = batch->encoded[i];
      EXPECT_EQ(sample.skipped, batch->labels[i] == kSkippedLabel);
      if (sample.skipped) skipped.insert(static_cast<size_t>(batch->index * 4 + i));
    }
    loader.release(*batch);
  }
  EXPECT_EQ(loader.bad_samples(), 2);
  EXPECT_EQ(skipped.size(), 2u);
}

TEST(DecodeOnCpu, FixedSharesSpreadEvenlyAndAutoFollowsTheBatchesWaiting) {
  auto taken = [](double fraction, int n) {
    CpuDecodeShare share;
    share.mode = CpuDecodeShare::Mode::kFixed;
    share.fraction = fraction;
    std::vector<int> positions;
    for (int i = 0; i < n; ++i)
      if (decode_on_cpu(share, i, 0)) positions.push_back(i);
    return positions;
  };
  EXPECT_EQ(taken(0.5, 8), (std::vector<int>{1, 3, 5, 7}));
  EXPECT_EQ(taken(0.25, 8), (std::vector<int>{3, 7}));
  EXPECT_EQ(taken(1.0, 5), (std::vector<int>{0, 1, 2, 3, 4}));
  EXPECT_EQ(taken(0.0, 5), std::vector<int>{});
  for (const double fraction : {0.1, 0.3, 0.55, 0.9})  // floor(n * fraction) of every n positions
    EXPECT_EQ(taken(fraction, 256).size(), static_cast<size_t>(256 * fraction)) << fraction;
  CpuDecodeShare automatic;
  automatic.mode = CpuDecodeShare::Mode::kAuto;
  automatic.ready_batches = 2;
  EXPECT_FALSE(decode_on_cpu(automatic, 0, 1));
  EXPECT_TRUE(decode_on_cpu(automatic, 0, 2));
  EXPECT_TRUE(decode_on_cpu(automatic, 5, 4));
  EXPECT_FALSE(decode_on_cpu(CpuDecodeShare{}, 0, 100));  // kOff
}

// A copy of a generated file whose scan data is damaged past its first bytes: its header and first scan pass the
// loader's checks (load_encoded takes it), libjpeg refuses it (restart markers where none are declared).
std::vector<uint8_t> damaged_scan(const std::vector<uint8_t>& good) {
  size_t sos = 0;
  for (size_t k = 2; k + 3 < good.size(); ++k) {
    if (good[k] == 0xFF && good[k + 1] == 0xDA) {
      sos = k;
      break;
    }
  }
  const size_t data = sos + 2 + (static_cast<size_t>(good[sos + 2]) << 8 | good[sos + 3]);
  std::vector<uint8_t> bad = good;
  const size_t middle = data + (good.size() - 2 - data) / 2;
  for (size_t k = middle; k + 1 < middle + 16 && k + 3 < bad.size(); k += 2) {
    bad[k] = 0xFF;
    bad[k + 1] = 0xD3;
  }
  return bad;
}

// decode: gpu with a fixed CPU share: the loader decodes exactly the share's positions, each into the image the
// pixel path makes for it; the rest stay compressed. A file libjpeg refuses stays compressed too (the device's
// routes report it), so the loader's bad-sample count is the one without the share.
TEST(BatchLoader, FixedCpuShareDecodesItsPositionsAsThePixelPathDoes) {
  test::TempDir tmp;
  const JpegFolderDataset dataset = generated_dataset(tmp);
  const std::string truncated = dataset.describe(4), damaged = dataset.describe(9);
  const std::vector<uint8_t> bytes = test::read_bytes(truncated);
  test::write_bytes(truncated, std::vector<uint8_t>(bytes.begin(), bytes.begin() + bytes.size() / 2));
  test::write_bytes(damaged, damaged_scan(test::read_bytes(damaged)));
  {
    EncodedSample sample;
    dataset.load_encoded(9, 1, sample);  // the header and first scan pass
    WorkerScratch scratch;
    std::vector<uint8_t> out(24 * 24 * 3);
    ASSERT_THROW(dataset.decode_encoded(sample, out.data(), scratch), DecodeError);
  }
  const size_t image_bytes = 24 * 24 * 3;
  const std::vector<size_t> order = epoch_order(dataset.size(), 5, 1, true);

  for (int workers : {0, 3}) {
    BatchPool pool(3, 4, 24, pageable(), BatchContent::kEncodedWithPixels);
    ASSERT_NE(pool.images(0), nullptr);
    LoaderOptions o = options(4, workers);
    o.cpu_share.mode = CpuDecodeShare::Mode::kFixed;
    o.cpu_share.fraction = 0.5;
    BatchLoader loader(dataset, order, 1, o, pool, nullptr);
    int64_t predecoded = 0, damaged_seen = 0;
    WorkerScratch scratch;
    std::vector<uint8_t> expected(image_bytes);
    while (std::optional<HostBatch> batch = loader.next()) {
      ASSERT_NE(batch->images, nullptr);
      for (int64_t i = 0; i < batch->size; ++i) {
        const EncodedSample& sample = batch->encoded[i];
        EXPECT_EQ(batch->labels[i], dataset.label(sample.index));
        const bool share = decode_on_cpu(o.cpu_share, i, 0);
        const bool refused = dataset.describe(sample.index) == damaged;
        damaged_seen += refused;
        EXPECT_EQ(sample.predecoded, share && !refused) << "batch " << batch->index << " position " << i;
        if (!sample.predecoded) continue;
        ++predecoded;
        dataset.load(sample.index, 1, expected.data(), scratch);  // the pixel path's image of the sample
        EXPECT_TRUE(
            std::equal(batch->images + i * image_bytes, batch->images + (i + 1) * image_bytes, expected.begin()))
            << "batch " << batch->index << " position " << i;
      }
      loader.release(*batch);
    }
    EXPECT_EQ(damaged_seen, 1);          // left to the device, not counted here
    EXPECT_EQ(loader.bad_samples(), 1);  // the truncated file only
    EXPECT_EQ(loader.cpu_decoded(), predecoded);
    EXPECT_GE(predecoded, 8);  // positions 1 and 3 of each batch (9 of 18), less the damaged file on one
  }
}

// A folder dataset's samples through another dataset, whose CPU-share decode the tests below change.
class DelegatingDataset : public ImageDataset {
 public:
  explicit DelegatingDataset(const JpegFolderDataset& inner) : inner_(inner) {}
  size_t size() const override { return inner_.size(); }
  int64_t label(size_t index) const override { return inner_.label(index); }
  std::string describe(size_t index) const override { return inner_.describe(index); }
  void load(size_t index, uint64_t epoch, uint8_t* out, WorkerScratch& scratch) const override {
    inner_.load(index, epoch, out, scratch);
  }
  void load_encoded(size_t index, uint64_t epoch, EncodedSample& out, DecodeBudget* budget) const override {
    inner_.load_encoded(index, epoch, out, budget);
  }

 protected:
  const JpegFolderDataset& inner_;
};

// Counts the CPU share's decodes and the most at once (each made to last 3 ms).
class CountingDataset final : public DelegatingDataset {
 public:
  using DelegatingDataset::DelegatingDataset;
  mutable std::atomic<int> now{0}, most{0}, decodes{0};
  void decode_encoded(const EncodedSample& sample, uint8_t* out, WorkerScratch& scratch) const override {
    const int at_once = ++now;
    int seen = most.load();
    while (at_once > seen && !most.compare_exchange_weak(seen, at_once)) {
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(3));
    inner_.decode_encoded(sample, out, scratch);
    ++decodes;
    --now;
  }
};

// The automatic share: while the consumer is slow (the GPU decoder keeps up, the threads are ahead) the threads
// decode most samples themselves, several at once; each such image is the pixel path's.
TEST(BatchLoader, AutomaticCpuShareDecodesWhileTheThreadsAreAhead) {
  test::TempDir tmp;
  const JpegFolderDataset inner = generated_dataset(tmp, 4, 16);
  const std::vector<size_t> order = epoch_order(inner.size(), 5, 0, true);
  const size_t image_bytes = 24 * 24 * 3;
  WorkerScratch scratch;
  std::vector<uint8_t> expected(image_bytes);

  for (const int workers : {1, 4}) {
    CountingDataset dataset(inner);
    BatchPool pool(6, 4, 24, pageable(), BatchContent::kEncodedWithPixels);
    LoaderOptions o = options(4, workers);
    o.cpu_share.mode = CpuDecodeShare::Mode::kAuto;
    o.cpu_share.ready_batches = 2;
    BatchLoader loader(dataset, order, 0, o, pool, nullptr);
    int64_t predecoded = 0, samples = 0;
    while (std::optional<HostBatch> batch = loader.next()) {
      for (int64_t i = 0; i < batch->size; ++i) {
        ++samples;
        if (!batch->encoded[i].predecoded) continue;
        ++predecoded;
        inner.load(batch->encoded[i].index, 0, expected.data(), scratch);
        EXPECT_TRUE(
            std::equal(batch->images + i * image_bytes, batch->images + (i + 1) * image_bytes, expected.begin()));
      }
      loader.release(*batch);
      std::this_thread::sleep_for(std::chrono::milliseconds(40));  // a step: the threads get ahead
    }
    std::printf("[ measured ] %d threads: %lld of %lld samples decoded by the loader, %d at most at once\n", workers,
                static_cast<long long>(predecoded), static_cast<long long>(samples), dataset.most.load());
    EXPECT_EQ(samples, 64);
    EXPECT_EQ(loader.cpu_decoded(), predecoded);
    EXPECT_EQ(dataset.decodes.load(), predecoded);
    EXPECT_GE(predecoded, samples / 2);  // 16 batches, a 40 ms step each: from the third batch on, ahead
    if (workers == 1)
      EXPECT_EQ(dataset.most.load(), 1);
    else
      EXPECT_GE(dataset.most.load(), 2);  // 3 ms decodes on 4 threads overlap
  }
}

// ... and while the consumer waits for every batch (the threads are behind) they only read: the feedback that
// leaves the GPU the images the threads cannot decode in time.
TEST(BatchLoader, AutomaticCpuShareOnlyReadsWhileTheConsumerWaits) {
  test::TempDir tmp;
  const JpegFolderDataset inner = generated_dataset(tmp, 4, 16);
  CountingDataset dataset(inner);
  BatchPool pool(6, 4, 24, pageable(), BatchContent::kEncodedWithPixels);
  LoaderOptions o = options(4, 1);
  o.cpu_share.mode = CpuDecodeShare::Mode::kAuto;
  BatchLoader loader(dataset, epoch_order(inner.size(), 5, 0, true), 0, o, pool, nullptr);
  int64_t samples = 0;
  while (std::optional<HostBatch> batch = loader.next()) {
    samples += batch->size;
    loader.release(*batch);
  }
  std::printf("[ measured ] a consumer that never waits: %lld of %lld samples decoded by the loader\n",
              static_cast<long long>(loader.cpu_decoded()), static_cast<long long>(samples));
  EXPECT_EQ(samples, 64);
  EXPECT_LE(loader.cpu_decoded(), samples / 4);  // two batches ahead are rarely waiting
}

// Its CPU-share decode of one sample fails with an error that is not a DecodeError (as a header that disagrees with
// libjpeg's reading of it raises std::invalid_argument).
class OneRefusalDataset final : public DelegatingDataset {
 public:
  OneRefusalDataset(const JpegFolderDataset& inner, size_t refused) : DelegatingDataset(inner), refused_(refused) {}
  void decode_encoded(const EncodedSample& sample, uint8_t* out, WorkerScratch& scratch) const override {
    if (sample.index == refused_) throw std::invalid_argument("the frame header and libjpeg disagree");
    inner_.decode_encoded(sample, out, scratch);
  }

 private:
  size_t refused_;
};

// Whatever the CPU share's decode throws, the sample stays compressed for the device's routes (which catch the same
// and count it there): not a bad sample here, and the epoch goes on.
TEST(BatchLoader, AnyFailureOfTheCpuShareLeavesTheSampleCompressed) {
  test::TempDir tmp;
  const JpegFolderDataset inner = generated_dataset(tmp);
  const OneRefusalDataset dataset(inner, 5);
  BatchPool pool(3, 4, 24, pageable(), BatchContent::kEncodedWithPixels);
  LoaderOptions o = options(4, 2);
  o.cpu_share.mode = CpuDecodeShare::Mode::kFixed;
  o.cpu_share.fraction = 1.0;
  BatchLoader loader(dataset, epoch_order(dataset.size(), 5, 1, true), 1, o, pool, nullptr);
  int64_t samples = 0, compressed = 0;
  while (std::optional<HostBatch> batch = loader.next()) {
    for (int64_t i = 0; i < batch->size; ++i) {
      ++samples;
      const bool refused = batch->encoded[i].index == 5;
      compressed += !batch->encoded[i].predecoded;
      EXPECT_EQ(batch->encoded[i].predecoded, !refused) << "sample " << batch->encoded[i].index;
    }
    loader.release(*batch);
  }
  EXPECT_EQ(compressed, 1);
  EXPECT_EQ(loader.bad_samples(), 0);
  EXPECT_EQ(loader.cpu_decoded(), samples - 1);
}

TEST(BatchLoader, CpuShareNeedsPixelRoomAndAShareOfOneAtMost) {
  FakeDataset dataset(8);
  BatchPool encoded(2, 4, kImage, pageable(), BatchContent::kEncoded);
  LoaderOptions o = options(4, 0);
  o.cpu_share.mode = CpuDecodeShare::Mode::kAuto;
  EXPECT_THROW(BatchLoader(dataset, identity(8), 0, o, encoded, nullptr), std::logic_error);
  BatchPool pixels(2, 4, kImage, pageable());
  EXPECT_THROW(BatchLoader(dataset, identity(8), 0, o, pixels, nullptr), std::logic_error);
  BatchPool both(2, 4, kImage, pageable(), BatchContent::kEncodedWithPixels);
  o.cpu_share.mode = CpuDecodeShare::Mode::kFixed;
  o.cpu_share.fraction = 1.5;
  EXPECT_THROW(BatchLoader(dataset, identity(8), 0, o, both, nullptr), ConfigError);
  o.cpu_share.mode = CpuDecodeShare::Mode::kAuto;
  o.cpu_share.ready_batches = 0;
  EXPECT_THROW(BatchLoader(dataset, identity(8), 0, o, both, nullptr), ConfigError);
}

TEST(ReplacementSources, TakeTheNextDecodedPositionCyclically) {
  EXPECT_EQ(replacement_sources({true, false, false, true, false}), (std::vector<int>{0, 3, 3, 3, 0}));
  EXPECT_EQ(replacement_sources({false, true}), (std::vector<int>{1, 1}));
  EXPECT_EQ(replacement_sources({true, true, true}), (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(replacement_sources({}), std::vector<int>{});
  EXPECT_THROW(replacement_sources({false, false}), DecodeError);
}

}  // namespace
}  // namespace rn50::data
