// tests/input/gpu_decode/test_decode_pipeline.cpp: DecodePipeline (the GPU decoder's thread and slot cycle) with fake
// work: order, slot reuse, failed decodes, fatal errors, drain and abandon, and many batches across threads. Also built
// with ThreadSanitizer where the compiler has it (rn50_decode_pipeline_tsan_tests).
#include "input/gpu_decode/decode_pipeline.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <vector>

namespace rn50::input {
namespace {

using namespace std::chrono_literals;

// Fake work: records what the decode thread did; the test decides when "the device" is done with a slot and which
// batches fail.
struct FakeWork {
  std::mutex mutex;
  std::condition_variable changed;
  std::vector<std::pair<int, uint64_t>> decoded;  // (job, number), in decode order
  std::vector<int> decode_slots;                  // the slot of each decode
  std::vector<int> handed_back;                   // jobs handed back after a failed decode
  std::vector<int> retired;                       // jobs handed back by retire, in order
  std::map<int, int> slot_holds;                  // slot -> job its last decode left there
  std::map<int, bool> device_busy;                // slot -> the device still reads it
  std::function<void(int job)> before_decode;     // may block or throw
  std::function<void(int slot)> before_retire;    // may throw
  // Written by the decode thread without this fake's lock, read by the caller after wait_decoded: as the decoder's
  // slots are, so that ThreadSanitizer sees whether the pipeline orders the two.
  std::vector<int> payload = std::vector<int>(8, -1);

  DecodePipeline<int>::Work work() {
    DecodePipeline<int>::Work w;
    w.decode = [this](const int& job, int slot, uint64_t number) {
      if (before_decode) before_decode(job);
      payload[static_cast<size_t>(slot)] = job;
      std::lock_guard<std::mutex> lock(mutex);
      decoded.emplace_back(job, number);
      decode_slots.push_back(slot);
      slot_holds[slot] = job;
      changed.notify_all();
    };
    w.hand_back = [this](const int& job) {
      std::lock_guard<std::mutex> lock(mutex);
      handed_back.push_back(job);
      changed.notify_all();
    };
    w.device_done = [this](int slot) {
      std::lock_guard<std::mutex> lock(mutex);
      return !device_busy[slot];
    };
    w.retire = [this](int slot) {
      std::unique_lock<std::mutex> lock(mutex);
      changed.wait(lock, [&] { return !device_busy[slot]; });
      retired.push_back(slot_holds.at(slot));
      lock.unlock();
      if (before_retire) before_retire(slot);
    };
    return w;
  }
  void set_busy(int slot, bool busy) {
    {
      std::lock_guard<std::mutex> lock(mutex);
      device_busy[slot] = busy;
    }
    changed.notify_all();
  }
  size_t decoded_count() {
    std::lock_guard<std::mutex> lock(mutex);
    return decoded.size();
  }
  std::vector<int> retired_jobs() {
    std::lock_guard<std::mutex> lock(mutex);
    return retired;
  }
};

TEST(DecodePipeline, DecodesInSubmitOrderIntoRotatingSlotsAndHandsEachBatchBackOnce) {
  FakeWork fake;
  std::vector<int> made;
  {
    DecodePipeline<int> pipeline(3, fake.work());
    for (int job = 0; job < 2; ++job)
      pipeline.submit(job);  // two ahead, as training does at decode_ahead_batches 2 (N+1 slots)
    for (int job = 0; job < 20; ++job) {
      const int slot = pipeline.wait_decoded();
      EXPECT_EQ(slot, job % 3);
      made.push_back(job);
      pipeline.mark_finished(slot);
      if (job + 2 < 20) pipeline.submit(job + 2);
    }
    pipeline.drain();
    EXPECT_FALSE(pipeline.holds_submitted());
    std::vector<int> expected(20);
    for (int i = 0; i < 20; ++i) expected[static_cast<size_t>(i)] = i;
    EXPECT_EQ(fake.retired_jobs(), expected);
    std::lock_guard<std::mutex> lock(fake.mutex);
    ASSERT_EQ(fake.decoded.size(), 20u);
    for (int i = 0; i < 20; ++i) {
      EXPECT_EQ(fake.decoded[static_cast<size_t>(i)], std::make_pair(i, static_cast<uint64_t>(i)));
      EXPECT_EQ(fake.decode_slots[static_cast<size_t>(i)], i % 3);
    }
  }
  EXPECT_TRUE(fake.handed_back.empty());
}

// A slot is decoded into again only once its previous batch was finished (made into input) and the device is done
// with it; the wait for the device is the slot's own, not every finished slot's.
TEST(DecodePipeline, ReusesASlotOnlyOnceItsBatchIsFinishedAndTheDeviceIsDoneWithIt) {
  FakeWork fake;
  DecodePipeline<int> pipeline(2, fake.work());
  pipeline.submit(0);
  pipeline.submit(1);
  EXPECT_EQ(pipeline.wait_decoded(), 0);
  fake.set_busy(0, true);  // the device reads slot 0 once its batch is made into input
  pipeline.mark_finished(0);
  pipeline.submit(2);  // for slot 0
  std::this_thread::sleep_for(50ms);
  EXPECT_EQ(fake.decoded_count(), 2u) << "batch 2 decoded into slot 0 while the device still read it";
  fake.set_busy(0, false);
  EXPECT_EQ(pipeline.wait_decoded(), 1);
  pipeline.mark_finished(1);
  EXPECT_EQ(pipeline.wait_decoded(), 0);    // batch 2
  EXPECT_EQ(fake.retired_jobs().at(0), 0);  // (and batch 1 too, if the decode thread found it done in passing)
  pipeline.mark_finished(0);
  pipeline.drain();
  EXPECT_EQ(fake.retired_jobs(), (std::vector<int>{0, 1, 2}));

  // Not yet finished: never decoded into, whatever the device does.
  pipeline.submit(3);                                  // slot 1
  pipeline.submit(4);                                  // slot 0
  EXPECT_THROW(pipeline.submit(5), std::logic_error);  // two submitted, two slots
  EXPECT_EQ(pipeline.wait_decoded(), 1);
  EXPECT_EQ(pipeline.wait_decoded(), 1) << "the batch stays the oldest until mark_finished";
  pipeline.mark_finished(1);
  EXPECT_EQ(pipeline.wait_decoded(), 0);
  pipeline.mark_finished(0);
  pipeline.drain();
}

// A decode that throws fails its batch only: handed back at once, thrown by its wait_decoded, and the next batch is
// decoded only after that (so a strict-mode stop does not decode on).
TEST(DecodePipeline, AFailedDecodeIsThrownByItsWaitAndHandedBack) {
  FakeWork fake;
  fake.before_decode = [](int job) {
    if (job == 1) throw std::runtime_error("bad sample in batch 1");
  };
  DecodePipeline<int> pipeline(3, fake.work());
  for (int job = 0; job < 3; ++job) pipeline.submit(job);
  pipeline.mark_finished(pipeline.wait_decoded());
  std::this_thread::sleep_for(50ms);
  EXPECT_EQ(fake.decoded_count(), 1u) << "batch 2 decoded while the failed batch 1 was not yet taken";
  try {
    pipeline.wait_decoded();
    ADD_FAILURE() << "no error";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "bad sample in batch 1");
  }
  {
    std::lock_guard<std::mutex> lock(fake.mutex);
    EXPECT_EQ(fake.handed_back, (std::vector<int>{1}));
  }
  EXPECT_EQ(pipeline.wait_decoded(), 2);
  pipeline.mark_finished(2);
  pipeline.drain();
  EXPECT_EQ(fake.retired_jobs(), (std::vector<int>{0, 2}));

  // Failed and not yet taken when abandoned: handed back already, so not among what abandon forgets.
  pipeline.submit(1);  // batch 3, slot 0: fails again
  {
    std::unique_lock<std::mutex> lock(fake.mutex);
    fake.changed.wait(lock, [&] { return fake.handed_back.size() == 2; });
  }
  std::vector<int> forgotten;
  pipeline.abandon([&](int slot, bool) { forgotten.push_back(slot); });
  EXPECT_TRUE(forgotten.empty());
  EXPECT_FALSE(pipeline.holds_submitted());
}

// An error outside any batch's decode (the thread's start, a retire) stops the decode thread: wait_decoded and
// submit throw it, instead of the thread spinning on it; abandon() starts afresh.
TEST(DecodePipeline, AnErrorOutsideADecodeIsFatalUntilAbandon) {
  FakeWork fake;
  std::atomic<bool> fail_retire{true};
  fake.before_retire = [&](int) {
    if (fail_retire) throw std::runtime_error("device lost");
  };
  DecodePipeline<int> pipeline(1, fake.work());
  pipeline.submit(0);
  pipeline.mark_finished(pipeline.wait_decoded());
  pipeline.submit(1);  // needs slot 0: its retire fails
  EXPECT_THROW(pipeline.wait_decoded(), std::runtime_error);
  EXPECT_THROW(pipeline.submit(2), std::runtime_error);
  EXPECT_EQ(fake.retired_jobs(), (std::vector<int>{0})) << "handed back although the retire failed";
  std::vector<int> forgotten;
  pipeline.abandon([&](int slot, bool) { forgotten.push_back(slot); });
  EXPECT_TRUE(forgotten.empty());  // slot 0 was freed by the failed retire
  EXPECT_FALSE(pipeline.holds_submitted());
  fail_retire = false;
  pipeline.submit(3);
  EXPECT_EQ(pipeline.wait_decoded(), 0);
  pipeline.mark_finished(0);
  pipeline.drain();

  FakeWork no_start;
  DecodePipeline<int>::Work work = no_start.work();
  work.on_thread_start = [] { throw std::runtime_error("no device"); };
  DecodePipeline<int> broken(2, work);
  EXPECT_THROW(
      {
        broken.submit(0);  // accepted if the thread has not started yet
        broken.wait_decoded();
      },
      std::runtime_error);
}

// abandon() waits for the batch being decoded, forgets what is held (saying which were made into input), drops
// what was not yet taken, and hands nothing back.
TEST(DecodePipeline, AbandonWaitsForTheDecodeInProgressAndForgetsTheRest) {
  FakeWork fake;
  std::mutex gate_mutex;
  std::condition_variable gate_changed;
  bool gate_open = false, in_decode_2 = false;
  fake.before_decode = [&](int job) {
    if (job != 2) return;
    std::unique_lock<std::mutex> lock(gate_mutex);
    in_decode_2 = true;
    gate_changed.notify_all();
    gate_changed.wait(lock, [&] { return gate_open; });
  };
  DecodePipeline<int> pipeline(3, fake.work());
  fake.set_busy(0, true);
  pipeline.submit(0);
  pipeline.submit(1);
  pipeline.mark_finished(pipeline.wait_decoded());  // 0: finished, the device still reads it
  pipeline.submit(2);                               // slot 2, blocks in its decode
  {
    std::unique_lock<std::mutex> lock(gate_mutex);
    gate_changed.wait(lock, [&] { return in_decode_2; });
  }
  std::vector<std::pair<int, bool>> forgotten;
  std::atomic<bool> abandoned{false};
  std::thread abandoning([&] {
    pipeline.abandon([&](int slot, bool finished) { forgotten.emplace_back(slot, finished); });
    abandoned = true;
  });
  std::this_thread::sleep_for(50ms);
  EXPECT_FALSE(abandoned) << "abandon returned while batch 2 was being decoded";
  {
    std::lock_guard<std::mutex> lock(gate_mutex);
    gate_open = true;
  }
  gate_changed.notify_all();
  abandoning.join();
  EXPECT_EQ(forgotten, (std::vector<std::pair<int, bool>>{{0, true}, {1, false}, {2, false}}));
  EXPECT_TRUE(fake.retired_jobs().empty());
  EXPECT_FALSE(pipeline.holds_submitted());
  EXPECT_THROW(pipeline.wait_decoded(), std::logic_error);
  fake.set_busy(0, false);
  pipeline.submit(3);  // batch number 3: slot 0
  EXPECT_EQ(pipeline.wait_decoded(), 0);
  pipeline.mark_finished(0);
  pipeline.drain();
  EXPECT_EQ(fake.retired_jobs(), (std::vector<int>{3}));
}

// drain() hands back every finished batch and keeps those submitted and not finished (the next epoch's first).
TEST(DecodePipeline, DrainHandsBackFinishedBatchesAndKeepsSubmittedOnes) {
  FakeWork fake;
  DecodePipeline<int> pipeline(3, fake.work());
  pipeline.submit(0);
  pipeline.submit(1);
  pipeline.mark_finished(pipeline.wait_decoded());
  pipeline.mark_finished(pipeline.wait_decoded());
  pipeline.submit(2);
  pipeline.submit(3);  // for slot 0: the decode thread may hand batch 0 (and 1) back itself, beside drain
  pipeline.drain();
  std::vector<int> retired = fake.retired_jobs();
  std::sort(retired.begin(), retired.end());
  EXPECT_EQ(retired, (std::vector<int>{0, 1}));
  EXPECT_TRUE(pipeline.holds_submitted());
  EXPECT_EQ(pipeline.wait_decoded(), 2);
  pipeline.mark_finished(2);
  EXPECT_EQ(pipeline.wait_decoded(), 0);
  pipeline.mark_finished(0);
  pipeline.drain();
  retired = fake.retired_jobs();
  ASSERT_EQ(retired.size(), 4u);
  EXPECT_EQ(std::vector<int>(retired.begin() + 2, retired.end()), (std::vector<int>{2, 3}));
}

// Many batches with a device that finishes with slots at random moments on another thread: every batch decoded
// once, in order, made into input in order, and handed back once (in any order: this device, unlike a stream,
// may finish a later batch first). Under ThreadSanitizer this is the race check.
TEST(DecodePipeline, ManyBatchesWithADeviceOnAnotherThread) {
  FakeWork fake;
  constexpr int kBatches = 2000;
  DecodePipeline<int> pipeline(3, fake.work());
  std::atomic<bool> stop{false};
  std::thread device([&] {  // frees slots at its own pace
    unsigned x = 12345;
    while (!stop) {
      x = x * 1103515245u + 12345u;
      fake.set_busy(static_cast<int>((x >> 16) % 3), false);
      std::this_thread::yield();
    }
  });
  struct Join {  // also when an ASSERT returns early
    std::atomic<bool>& stop;
    std::thread& thread;
    ~Join() {
      stop = true;
      thread.join();
    }
  } join{stop, device};
  pipeline.submit(0);
  pipeline.submit(1);
  for (int job = 0; job < kBatches; ++job) {
    const int slot = pipeline.wait_decoded();
    ASSERT_EQ(slot, job % 3);
    ASSERT_EQ(fake.payload[static_cast<size_t>(slot)], job);  // the decode thread's write, read here
    fake.set_busy(slot, true);
    pipeline.mark_finished(slot);
    if (job + 2 < kBatches) pipeline.submit(job + 2);
  }
  for (int slot = 0; slot < 3; ++slot) fake.set_busy(slot, false);
  pipeline.drain();
  std::vector<int> retired = fake.retired_jobs();
  std::sort(retired.begin(), retired.end());
  ASSERT_EQ(retired.size(), static_cast<size_t>(kBatches));
  for (int i = 0; i < kBatches; ++i) ASSERT_EQ(retired[static_cast<size_t>(i)], i);
  std::lock_guard<std::mutex> lock(fake.mutex);
  ASSERT_EQ(fake.decoded.size(), static_cast<size_t>(kBatches));
  for (int i = 0; i < kBatches; ++i) ASSERT_EQ(fake.decoded[static_cast<size_t>(i)].first, i);
}

}  // namespace
}  // namespace rn50::input
