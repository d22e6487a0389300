// input/synthetic_source.cpp: data: synthetic: a few fixed random batches made once on the device and cycled, so that
// loading is one device-to-device copy a step, no reading or decoding, and the step rate is compute alone.
#include "input/sources.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <mutex>
#include <stdexcept>


namespace rn50::input {
namespace {

constexpr int64_t kSyntheticClasses = 1000;
constexpr int kSyntheticBatches = 4;

class SyntheticSource final : public InputSource {
 public:
  SyntheticSource(const InputOptions& options, const InputContext& context) {
    for (int64_t c = 0; c < kSyntheticClasses; ++c) info_.classes.push_back("synthetic_" + std::to_string(c));
    info_.steps_per_epoch = options.synthetic_images / (static_cast<int64_t>(options.batch_size) * context.world);
    if (options.max_steps > 0) info_.steps_per_epoch = std::min(info_.steps_per_epoch, options.max_steps);
    // Made on the device itself: drawn on the CPU and uploaded, they cost 0.8 s of each start at batch 256 (an H100's
    // host; docs/ablation.md).
    // The generator is a private copy of the device's, seeded here, so that the run's other draws are untouched.
    at::Generator gen = at::globalContext().defaultGenerator(context.device).clone();
    {
      std::lock_guard<std::mutex> lock(gen.mutex());
      gen.set_current_seed(static_cast<uint64_t>(options.seed));
    }
    const int size = options.image_size;
    const at::TensorOptions image_options = at::TensorOptions(context.device).dtype(context.image_dtype);
    for (int i = 0; i < kSyntheticBatches; ++i) {
      // Drawn in NCHW order, so that a batch's images are the same whatever its channels and memory layout.
      const at::Tensor drawn = at::randn({options.batch_size, 3, size, size}, gen, image_options);
      at::Tensor images = at::zeros({options.batch_size, context.image_channels, size, size},
                                    image_options.memory_format(context.channels_last ? at::MemoryFormat::ChannelsLast
                                                                                      : at::MemoryFormat::Contiguous));
      images.narrow(1, 0, 3).copy_(drawn);  // channels past the image's 3 stay zero (models/stem.h)
      at::Tensor labels =
          at::randint(kSyntheticClasses, {options.batch_size}, gen, at::TensorOptions(context.device).dtype(at::kLong));
      batches_.emplace_back(images, labels);
    }
  }

  std::vector<std::pair<std::string, std::string>> describe() const override {
    return {{"(train images)", "synthetic"}};
  }

  void begin_epoch(int64_t, int64_t first_step) override {
    cursor_ = static_cast<size_t>(first_step) % batches_.size();  // the batches cycle from the epoch's first step
  }

  void fill(at::Tensor& images, at::Tensor& labels) override {
    const auto& [x, y] = batches_[cursor_];
    cursor_ = (cursor_ + 1) % batches_.size();
    images.copy_(x);
    labels.copy_(y);
  }

  InputCounts end_epoch() override { return {}; }

  InputCounts validate(const EvalBatch&) override { throw std::logic_error("synthetic data has no validation split"); }

 private:
  std::vector<std::pair<at::Tensor, at::Tensor>> batches_;
  size_t cursor_ = 0;
};

}  // namespace

std::unique_ptr<InputSource> make_synthetic_source(const InputOptions& options, const InputContext& context) {
  return std::make_unique<SyntheticSource>(options, context);
}

}  // namespace rn50::input
