// input/synthetic_source.cpp: data: synthetic: a few fixed random batches made once on the device and cycled, so that
// loading is one device-to-device copy a step, no reading or decoding, and the step rate is compute alone.
#include "input/sources.h"

#include <ATen/ATen.h>

#include <algorithm>
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
    at::Generator gen = at::detail::createCPUGenerator(static_cast<uint64_t>(options.seed));
    const int size = options.image_size;
    for (int i = 0; i < kSyntheticBatches; ++i) {
      at::Tensor images = at::randn({options.batch_size, 3, size, size}, gen, at::TensorOptions(at::kFloat));
      if (context.image_channels > 3) images = at::constant_pad_nd(images, {0, 0, 0, 0, 0, context.image_channels - 3});
      at::Tensor labels = at::randint(kSyntheticClasses, {options.batch_size}, gen, at::TensorOptions(at::kLong));
      images = images.to(context.device, context.image_dtype);
      if (context.channels_last) images = images.contiguous(at::MemoryFormat::ChannelsLast);
      batches_.emplace_back(images, labels.to(context.device));
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
