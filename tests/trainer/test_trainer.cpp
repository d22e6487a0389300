// tests/trainer/test_trainer.cpp: the epoch loop against a fake input source, on the CPU: the calls it makes and in
// which order, the step's fixed input tensors, and the source's counters in the epoch records under their own names.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/config.h"
#include "core/errors.h"
#include "core/launch_env.h"
#include "input/source.h"
#include "tests/support/temp_dir.h"
#include "trainer/trainer.h"

namespace rn50::trainer {
namespace {

// Random batches of a 3-class problem; every call is written to `events`.
class FakeSource final : public input::InputSource {
 public:
  FakeSource(std::vector<std::string>& events, std::vector<void*>& fill_addresses, std::vector<int64_t>& eval_sizes)
      : events_(events), fill_addresses_(fill_addresses), eval_sizes_(eval_sizes) {
    info_.classes = {"a", "b", "c"};
    info_.train_images = 12;
    info_.val_images = 6;
    info_.steps_per_epoch = 3;
  }
  std::vector<std::pair<std::string, std::string>> describe() const override { return {{"(fake)", "fake"}}; }
  void begin_epoch(int64_t epoch, int64_t) override { events_.push_back("begin " + std::to_string(epoch)); }
  // From this fill on (1-based), the images are NaN: the loss and, after the step, the weights too.
  int nan_from_fill = 0;
  void fill(at::Tensor& images, at::Tensor& labels) override {
    events_.push_back("fill");
    fill_addresses_.push_back(images.data_ptr());
    const bool nan = nan_from_fill > 0 && static_cast<int>(fill_addresses_.size()) >= nan_from_fill;
    images.copy_(nan ? torch::full(images.sizes(), NAN) : torch::randn(images.sizes()));
    labels.copy_(torch::randint(3, {labels.size(0)}, torch::kLong));
  }
  void after_step() override { events_.push_back("after"); }
  input::InputCounts end_epoch() override {
    events_.push_back("end");
    input::InputCounts counts;
    counts.wait_s = 0.25;
    counts.bad_samples = 2;
    counts.extra = {{"fake_counter", 7.0}, {"fake_unavailable", std::nullopt}};
    return counts;
  }
  input::InputCounts validate(const input::EvalBatch& eval) override {
    events_.push_back("validate");
    for (const int64_t n : {4, 2}) {  // this rank's 6 images, the last batch short
      eval(torch::randn({n, 3, 32, 32}), torch::randint(3, {n}, torch::kLong));
      eval_sizes_.push_back(n);
    }
    input::InputCounts counts;
    counts.bad_samples = 1;
    return counts;
  }

 private:
  std::vector<std::string>& events_;
  std::vector<void*>& fill_addresses_;
  std::vector<int64_t>& eval_sizes_;
};

std::vector<std::string> lines_of_type(const std::string& path, const std::string& type) {
  std::ifstream in(path);
  std::vector<std::string> out;
  for (std::string line; std::getline(in, line);) {
    if (line.find("\"type\":\"" + type + "\"") != std::string::npos) out.push_back(line);
  }
  return out;
}

// A resnet18 run of 32 px batches of 4 on the CPU, into out_dir, fed by a FakeSource.
Config fake_run(const std::string& out_dir, int epochs, int log_every) {
  Config config;
  config.model = "resnet18";
  config.device = "cpu";
  config.data = DataSource::kSynthetic;  // not read: the fake source is the input
  config.image_size = 32;
  config.batch_size = 4;
  config.epochs = epochs;
  config.warmup_epochs = 0;
  config.log_every = log_every;
  config.out_dir = out_dir;
  return config;
}

TEST(EpochLoop, ReadsEveryStepFromItsSourceAndRecordsTheSourcesCounters) {
  testing::TempDir dir;
  torch::manual_seed(0);
  const Config config = fake_run(dir.path(), /*epochs=*/2, /*log_every=*/2);
  std::vector<std::string> events;
  std::vector<void*> addresses;
  std::vector<int64_t> eval_sizes;
  train(config, LaunchEnv{}, std::make_unique<FakeSource>(events, addresses, eval_sizes));

  const std::vector<std::string> epoch_calls = {"fill", "after", "fill", "after", "fill", "after", "end", "validate"};
  std::vector<std::string> expected = {"begin 0"};
  expected.insert(expected.end(), epoch_calls.begin(), epoch_calls.end());
  expected.push_back("begin 1");
  expected.insert(expected.end(), epoch_calls.begin(), epoch_calls.end());
  EXPECT_EQ(events, expected);
  ASSERT_EQ(addresses.size(), 6u);
  for (void* a : addresses) EXPECT_EQ(a, addresses.front());  // the step's input stays where a graph would read it
  EXPECT_EQ(eval_sizes, (std::vector<int64_t>{4, 2, 4, 2}));

  const auto epochs = lines_of_type(dir.file("metrics.jsonl"), "epoch");
  ASSERT_EQ(epochs.size(), 2u);
  for (const auto& e : epochs) {
    EXPECT_NE(e.find("\"fake_counter\":7.0"), std::string::npos) << e;
    EXPECT_NE(e.find("\"fake_unavailable\":null"), std::string::npos) << e;
    EXPECT_NE(e.find("\"data_wait_s\":0.25"), std::string::npos) << e;
    EXPECT_NE(e.find("\"bad_samples\":3"), std::string::npos) << e;  // 2 in training, 1 in validation
    EXPECT_NE(e.find("\"val_bad_samples\":1"), std::string::npos) << e;
    EXPECT_NE(e.find("\"val_images\":6"), std::string::npos) << e;
    EXPECT_NE(e.find("\"steps\":3"), std::string::npos) << e;
    EXPECT_NE(e.find("\"images\":12"), std::string::npos) << e;
    EXPECT_EQ(e.find("\"val_loss\":null"), std::string::npos) << e;  // validated
    EXPECT_EQ(e.find("h2d_copy_s"), std::string::npos) << e;         // no other source's counters
    EXPECT_EQ(e.find("gpu_decode_"), std::string::npos) << e;
  }
  EXPECT_EQ(lines_of_type(dir.file("metrics.jsonl"), "step").size(), 3u);  // global steps 2, 4 and 6
  EXPECT_TRUE(testing::file_exists(dir.file("checkpoint.safetensors")));
}

// A run whose loss and weights turn NaN stops at the next log step, before it writes a record or a checkpoint from
// them: it once ran on and wrote checkpoint_best from NaN weights.
TEST(EpochLoop, ALossAndWeightsThatAreNoLongerFiniteStopTheRun) {
  testing::TempDir dir;
  torch::manual_seed(0);
  const Config config = fake_run(dir.path(), /*epochs=*/3, /*log_every=*/1);
  std::vector<std::string> events;
  std::vector<void*> addresses;
  std::vector<int64_t> eval_sizes;
  auto source = std::make_unique<FakeSource>(events, addresses, eval_sizes);
  source->nan_from_fill = 5;  // the second step of the second epoch
  std::string message;
  try {
    train(config, LaunchEnv{}, std::move(source));
  } catch (const DivergedError& e) {
    message = e.what();
  }
  EXPECT_NE(message.find("the loss is nan over its last steps of epoch 2 (global step 5) and the weights are no "
                         "longer finite; the run stops here, its checkpoint of the last finished epoch kept"),
            std::string::npos)
      << message;
  EXPECT_EQ(lines_of_type(dir.file("metrics.jsonl"), "epoch").size(), 1u);
  EXPECT_EQ(lines_of_type(dir.file("metrics.jsonl"), "step").size(), 4u);  // the NaN step's record is not written
  EXPECT_TRUE(testing::file_exists(dir.file("checkpoint.safetensors")));
}

}  // namespace
}  // namespace rn50::trainer
