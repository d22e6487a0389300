// tests/input/test_sources.cpp: the input sources' batches with more channels than the image's 3 (a ResNet stem's
// stem_channels, input/source.h InputContext::image_channels): the same first 3 channels as a 3-channel source, exact
// zeros after them, for synthetic batches and CPU-decoded JPEG files (training and validation batches).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <string>
#include <vector>

#include "codecs/jpeg_codec.h"
#include "input/source.h"
#include "tests/support/test_support.h"

namespace rn50::input {
namespace {

struct Batches {
  std::vector<at::Tensor> train, val;
};

// Two training batches and every validation batch of a source made with `channels`, in channels-last memory as the
// fast configuration has them (the padded channels are then interleaved with the image's).
Batches read_batches(const InputOptions& options, int64_t channels) {
  InputContext context;
  context.image_channels = channels;
  context.channels_last = true;
  const std::unique_ptr<InputSource> source = create_input_source(options, context);
  Batches out;
  source->begin_epoch(0);
  for (int step = 0; step < 2; ++step) {
    at::Tensor images = at::full({options.batch_size, channels, options.image_size, options.image_size}, std::nan(""))
                            .contiguous(at::MemoryFormat::ChannelsLast);
    at::Tensor labels = at::zeros({options.batch_size}, at::kLong);
    source->fill(images, labels);
    out.train.push_back(images);
  }
  source->end_epoch();
  if (source->info().val_images > 0) {
    source->validate([&](const at::Tensor& images, const at::Tensor&) {
      EXPECT_EQ(images.size(1), channels);
      out.val.push_back(images.clone());
    });
  }
  return out;
}

void expect_padded(const std::vector<at::Tensor>& three, const std::vector<at::Tensor>& four, const char* what) {
  ASSERT_EQ(three.size(), four.size()) << what;
  for (size_t i = 0; i < three.size(); ++i) {
    EXPECT_EQ(four[i].size(1), 4) << what;
    EXPECT_TRUE(torch::equal(four[i].narrow(1, 0, 3), three[i])) << what << " batch " << i;
    EXPECT_EQ(four[i].narrow(1, 3, 1).abs().max().item<double>(), 0.0) << what << " batch " << i;
    EXPECT_GT(three[i].abs().max().item<double>(), 0.0) << what << " batch " << i;  // an image, not zeros
  }
}

// Options of a synthetic source of `images` images an epoch.
InputOptions synthetic_options(int batch_size, int image_size, int64_t images, int64_t seed) {
  InputOptions options;
  options.kind = SourceKind::kSynthetic;
  options.batch_size = batch_size;
  options.image_size = image_size;
  options.synthetic_images = images;
  options.seed = seed;
  return options;
}

TEST(Sources, SyntheticBatchesHaveZerosPastTheImagesChannels) {
  const InputOptions options = synthetic_options(3, 16, 12, 5);
  const Batches three = read_batches(options, 3), four = read_batches(options, 4);
  expect_padded(three.train, four.train, "synthetic");
}

// The synthetic batches come from a generator of their own, seeded by the run's seed: the same seed gives the same
// batches, another seed others, and making them draws nothing from the device's default generator (the run's other
// draws, such as the model's initial weights, stay as they were).
TEST(Sources, SyntheticBatchesFollowTheSeedAndLeaveTheDefaultGeneratorAlone) {
  InputOptions options = synthetic_options(2, 8, 8, 11);
  at::manual_seed(123);
  const at::Tensor expected = at::randn({16});
  at::manual_seed(123);
  const Batches first = read_batches(options, 3);
  EXPECT_TRUE(torch::equal(at::randn({16}), expected)) << "the default generator advanced";
  const Batches again = read_batches(options, 3);
  options.seed = 12;
  const Batches other = read_batches(options, 3);
  ASSERT_EQ(first.train.size(), 2u);
  for (size_t i = 0; i < first.train.size(); ++i) {
    EXPECT_TRUE(torch::equal(first.train[i], again.train[i])) << "batch " << i;
    EXPECT_FALSE(torch::equal(first.train[i], other.train[i])) << "batch " << i;
  }
  EXPECT_FALSE(torch::equal(first.train[0], first.train[1]));  // the fixed batches differ from each other
}

TEST(Sources, CpuDecodedBatchesHaveZerosPastTheImagesChannels) {
  test::TempDir root;
  int n = 0;
  for (const std::string split : {"train", "val"}) {
    for (const std::string cls : {"a", "b"}) {
      for (int i = 0; i < 3; ++i, ++n) {
        const std::vector<uint8_t> pixels = test::smooth_image(48 + 8 * i, 40, 0.3 * n);
        test::write_bytes(root.path() / split / cls / ("img" + std::to_string(i) + ".JPEG"),
                          codecs::encode_jpeg(pixels.data(), 48 + 8 * i, 40, 3, 90));
      }
    }
  }
  InputOptions options;
  options.kind = SourceKind::kCpuDecode;
  options.data_root = root.str();
  options.batch_size = 2;
  options.image_size = 24;
  options.val_resize = 28;
  options.seed = 7;
  options.workers = 2;
  options.pin_memory = false;
  const Batches three = read_batches(options, 3), four = read_batches(options, 4);
  expect_padded(three.train, four.train, "train");
  EXPECT_EQ(three.val.size(), 3u);  // 6 images in batches of 2
  expect_padded(three.val, four.val, "val");
}

}  // namespace
}  // namespace rn50::input
