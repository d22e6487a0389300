// parallel/grad_sync.cpp: gradient buckets, accumulator hooks and the ordered all-reduces.
#include "parallel/grad_sync.h"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/variable.h>
#include <torch/utils.h>

#include "parallel/communicator.h"

namespace rn50::parallel {
namespace {

// Each gradient starts on a 256-byte boundary in its bucket, as the vectorised kernels reading it expect.
constexpr int64_t kAlignElements = 64;

int64_t aligned(int64_t n) { return (n + kAlignElements - 1) / kAlignElements * kAlignElements; }

class ArrivalHook final : public torch::autograd::FunctionPostHook {
 public:
  explicit ArrivalHook(std::function<void()> on_arrival) : on_arrival_(std::move(on_arrival)) {}
  torch::autograd::variable_list operator()(const torch::autograd::variable_list& outputs,
                                            const torch::autograd::variable_list& /*inputs*/) override {
    on_arrival_();
    return outputs;
  }

 private:
  std::function<void()> on_arrival_;
};

}  // namespace

GradientBuckets::GradientBuckets(const std::vector<at::Tensor>& parameters, Communicator& comm, int64_t bucket_bytes)
    : comm_(comm) {
  std::vector<at::Tensor> trainable;
  for (const auto& p : parameters) {
    if (p.requires_grad()) trainable.push_back(p);
  }
  // Assign parameters, last first, to buckets of at least bucket_bytes (the last bucket may be smaller).
  struct Slot {
    at::Tensor parameter;
    int bucket;
    int64_t offset;
  };
  std::vector<Slot> slots;
  std::vector<int64_t> sizes;  // elements per bucket
  for (auto it = trainable.rbegin(); it != trainable.rend(); ++it) {
    if (sizes.empty() || sizes.back() * static_cast<int64_t>(it->element_size()) >= bucket_bytes) sizes.push_back(0);
    slots.push_back({*it, static_cast<int>(sizes.size()) - 1, sizes.back()});
    sizes.back() += aligned(it->numel());
  }
  for (const int64_t n : sizes) {
    Bucket b;
    b.buffer = at::zeros({n}, trainable.front().options());
    buckets_.push_back(std::move(b));
  }
  torch::NoGradGuard no_grad;
  for (const Slot& s : slots) {
    Bucket& bucket = buckets_[static_cast<size_t>(s.bucket)];
    ++bucket.parameters;
    // The view has the parameter's own strides (channels-last weights stay channels-last), which the
    // autograd engine's in-place accumulation and the fused optimizer both require.
    at::Tensor view =
        bucket.buffer.narrow(0, s.offset, s.parameter.numel()).as_strided(s.parameter.sizes(), s.parameter.strides());
    at::Tensor parameter = s.parameter;
    parameter.mutable_grad() = view;
    auto accumulator = torch::autograd::impl::grad_accumulator(parameter);
    const int index = s.bucket;
    accumulator->add_post_hook(std::make_unique<ArrivalHook>([this, index] { arrived(index); }));
    accumulators_.push_back(std::move(accumulator));
  }
}

GradientBuckets::~GradientBuckets() = default;

int64_t GradientBuckets::bytes() const {
  int64_t total = 0;
  for (const auto& b : buckets_) total += b.buffer.numel() * static_cast<int64_t>(b.buffer.element_size());
  return total;
}

void GradientBuckets::arrived(int bucket) {
  Bucket& b = buckets_[static_cast<size_t>(bucket)];
  if (++b.arrived == b.parameters) start_ready_buckets();
}

// Buckets start strictly in index order, so that every rank issues the same all-reduces in the same order
// even if its backward pass completes them in another.
void GradientBuckets::start_ready_buckets() {
  while (next_to_start_ < num_buckets()) {
    Bucket& b = buckets_[static_cast<size_t>(next_to_start_)];
    if (b.arrived < b.parameters) return;
    pending_.push_back(comm_.start_mean(b.buffer));
    ++next_to_start_;
  }
}

void GradientBuckets::finish() {
  for (auto& b : buckets_) b.arrived = b.parameters;  // a parameter the step did not reach has a zero gradient
  start_ready_buckets();
  for (auto& wait : pending_) wait();
  reset();
}

void GradientBuckets::reset() {
  pending_.clear();
  next_to_start_ = 0;
  for (auto& b : buckets_) b.arrived = 0;
}

void GradientBuckets::zero_gradients() {
  for (auto& b : buckets_) b.buffer.zero_();
}

}  // namespace rn50::parallel
