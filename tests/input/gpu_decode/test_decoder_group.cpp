// tests/input/gpu_decode/test_decoder_group.cpp: DecoderGroup against fake decoders: batches in turn, taken back in
// submit order, failures, abandon, counts.
#include "input/gpu_decode/decoder_group.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <deque>
#include <functional>
#include <memory>
#include <set>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace rn50::input {
namespace {

struct FakeCounts {
  int batches = 0;
  double slowest = 0;
  void add(const FakeCounts& o) {
    batches += o.batches;
    slowest = std::max(slowest, o.slowest);
  }
};

// Holds submitted batch numbers in order, as GpuJpegDecoder holds batches; finish_into writes the oldest's number
// into `images` and the decoder's own number into `labels`. A batch number in `fail` throws out of its finish_into
// (taken all the same, as a batch whose decode threw); with `reject_outputs` finish_into throws and keeps the batch
// (as GpuJpegDecoder does for bad tensors or a stopped decode thread).
class FakeDecoder {
 public:
  FakeDecoder(int id, std::vector<std::string>& log) : id_(id), log_(log) {}
  void submit(const int& batch, const std::function<void()>&, const std::function<void()>&) {
    if (refuse_submits) throw std::runtime_error("decode thread stopped");
    pending_.push_back(batch);
  }
  void finish_into(int& images, int& labels) {
    if (pending_.empty()) throw std::logic_error("nothing submitted");
    if (reject_outputs) throw std::invalid_argument("bad output tensors");
    const int batch = pending_.front();
    pending_.pop_front();
    ++finished_;
    ++counts_.batches;
    counts_.slowest = std::max(counts_.slowest, static_cast<double>(batch));
    if (fail.count(batch) > 0) throw std::runtime_error("bad sample in batch " + std::to_string(batch));
    images = batch;
    labels = id_;
  }
  void decode_into(const int& batch, int& images, int& labels, const std::function<void()>& on_bad,
                   const std::function<void()>& release) {
    if (!pending_.empty()) throw std::logic_error("decode_into while a submitted batch waits");
    submit(batch, on_bad, release);
    finish_into(images, labels);
  }
  void drain() { log_.push_back("drain " + std::to_string(id_)); }
  void abandon() {
    pending_.clear();
    log_.push_back("abandon " + std::to_string(id_));
  }
  uint64_t finished_batches() const { return finished_; }
  FakeCounts take_counts() { return std::exchange(counts_, {}); }
  std::string describe() const { return "fake"; }

  std::set<int> fail;
  bool refuse_submits = false;
  bool reject_outputs = false;

 private:
  int id_;
  std::vector<std::string>& log_;
  std::deque<int> pending_;
  uint64_t finished_ = 0;
  FakeCounts counts_;
};

struct Group {
  explicit Group(int n) {
    std::vector<std::unique_ptr<FakeDecoder>> decoders;
    for (int i = 0; i < n; ++i) {
      decoders.push_back(std::make_unique<FakeDecoder>(i, log));
      fakes.push_back(decoders.back().get());
    }
    group = std::make_unique<DecoderGroup<FakeDecoder>>(std::move(decoders));
  }
  void submit(int batch) { group->submit(batch, [] {}, [] {}); }
  std::pair<int, int> finish() {  // the batch made into input, and the decoder that made it
    int images = -1, labels = -1;
    group->finish_into(images, labels);
    return {images, labels};
  }
  std::vector<std::string> log;
  std::vector<FakeDecoder*> fakes;
  std::unique_ptr<DecoderGroup<FakeDecoder>> group;
};

TEST(DecoderGroup, TakesBatchesInTurnAndGivesThemBackInSubmitOrder) {
  Group g(2);
  // Three ahead, as training submits: batch s+3 after step s.
  for (int b = 0; b < 3; ++b) g.submit(b);
  for (int s = 0; s < 9; ++s) {
    const auto [batch, decoder] = g.finish();
    EXPECT_EQ(batch, s);
    EXPECT_EQ(decoder, s % 2);
    g.submit(s + 3);
  }
  EXPECT_EQ(g.group->take_counts().batches, 9);
}

TEST(DecoderGroup, OneDecoderIsThatDecoder) {
  Group g(1);
  for (int b = 0; b < 4; ++b) g.submit(b);
  for (int b = 0; b < 4; ++b) EXPECT_EQ(g.finish(), std::make_pair(b, 0));
  EXPECT_EQ(g.group->describe(), "fake");
}

TEST(DecoderGroup, AFailedBatchIsTakenAndTheNextComesFromTheNextDecoder) {
  Group g(3);
  g.fakes[1]->fail = {1};
  for (int b = 0; b < 5; ++b) g.submit(b);
  EXPECT_EQ(g.finish(), std::make_pair(0, 0));
  EXPECT_THROW(g.finish(), std::runtime_error);
  EXPECT_EQ(g.finish(), std::make_pair(2, 2));
  EXPECT_EQ(g.finish(), std::make_pair(3, 0));
  EXPECT_EQ(g.finish(), std::make_pair(4, 1));
}

TEST(DecoderGroup, AThrowThatLeavesTheBatchKeepsTheTurn) {
  Group g(2);
  for (int b = 0; b < 3; ++b) g.submit(b);
  EXPECT_EQ(g.finish(), std::make_pair(0, 0));
  g.fakes[1]->reject_outputs = true;
  EXPECT_THROW(g.finish(), std::invalid_argument);
  EXPECT_THROW(g.finish(), std::invalid_argument);  // still batch 1's decoder, not batch 2's
  g.fakes[1]->reject_outputs = false;
  EXPECT_EQ(g.finish(), std::make_pair(1, 1));
  EXPECT_EQ(g.finish(), std::make_pair(2, 0));
}

TEST(DecoderGroup, ARefusedSubmitKeepsTheTurn) {
  Group g(2);
  g.submit(0);
  g.fakes[1]->refuse_submits = true;
  EXPECT_THROW(g.submit(1), std::runtime_error);
  g.fakes[1]->refuse_submits = false;
  g.submit(1);  // to decoder 1 again: the refused batch was never taken
  EXPECT_EQ(g.finish(), std::make_pair(0, 0));
  EXPECT_EQ(g.finish(), std::make_pair(1, 1));
}

TEST(DecoderGroup, MisuseIsALogicError) {
  Group g(2);
  EXPECT_THROW(g.finish(), std::logic_error);
  g.submit(0);
  int images = 0, labels = 0;
  EXPECT_THROW(g.group->decode_into(1, images, labels, [] {}, [] {}), std::logic_error);
  EXPECT_EQ(g.finish(), std::make_pair(0, 0));
  // With nothing in flight, decode_into takes its turn like a submit and a finish.
  g.group->decode_into(1, images, labels, [] {}, [] {});
  EXPECT_EQ(std::make_pair(images, labels), std::make_pair(1, 1));
  g.submit(2);
  EXPECT_EQ(g.finish(), std::make_pair(2, 0));
  EXPECT_THROW(DecoderGroup<FakeDecoder>({}), std::invalid_argument);
}

TEST(DecoderGroup, AbandonReachesEveryDecoderAndStartsTheTurnAgain) {
  Group g(3);
  for (int b = 0; b < 4; ++b) g.submit(b);
  EXPECT_EQ(g.finish(), std::make_pair(0, 0));
  g.group->abandon();
  EXPECT_EQ(g.log, (std::vector<std::string>{"abandon 0", "abandon 1", "abandon 2"}));
  EXPECT_THROW(g.finish(), std::logic_error);  // nothing held after it
  g.submit(10);
  EXPECT_EQ(g.finish(), std::make_pair(10, 0));
  g.group->drain();
  EXPECT_EQ(g.log.back(), "drain 2");
}

TEST(DecoderGroup, CountsAddUpAndTheDescriptionNamesTheDecoders) {
  Group g(2);
  for (int b = 0; b < 5; ++b) g.submit(b);
  for (int b = 0; b < 5; ++b) g.finish();
  const FakeCounts c = g.group->take_counts();
  EXPECT_EQ(c.batches, 5);
  EXPECT_EQ(c.slowest, 4.0);  // the larger of the two decoders' own (4 and 3)
  EXPECT_EQ(g.group->take_counts().batches, 0);
  EXPECT_EQ(g.group->describe(), "fake; 2 decoders taking batches in turn, each with its own thread");
}

}  // namespace
}  // namespace rn50::input
