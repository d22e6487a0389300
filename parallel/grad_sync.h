// parallel/grad_sync.h: data-parallel gradient averaging in buckets, each all-reduced as soon as the backward
// pass has filled it, so that communication overlaps the rest of the backward pass.
#pragma once

#include <ATen/core/Tensor.h>

#include <functional>
#include <memory>
#include <vector>

namespace rn50::parallel {

class Communicator;

class GradientBuckets {
 public:
  // Parameters are packed in reverse order (the backward pass produces gradients roughly last layer first)
  // into buckets of about `bucket_bytes`; each parameter's gradient becomes a view into its bucket, so the
  // backward pass accumulates straight into the buffer that is all-reduced. Hooks on the parameters'
  // gradient accumulators start a bucket's all-reduce when its last gradient has arrived.
  GradientBuckets(const std::vector<at::Tensor>& parameters, Communicator& comm, int64_t bucket_bytes);
  ~GradientBuckets();
  GradientBuckets(const GradientBuckets&) = delete;
  GradientBuckets& operator=(const GradientBuckets&) = delete;

  // After backward: starts the buckets the hooks did not (a parameter without a gradient this step) and
  // waits for all of them; gradients then hold the mean over the ranks. Host-blocking only on Gloo.
  void finish();
  // Zeroes every gradient (one fill per bucket instead of one per parameter).
  void zero_gradients();
  // Forgets a step that did not finish (a failed graph capture): no bucket started, none waited for.
  void reset();

  int num_buckets() const { return static_cast<int>(buckets_.size()); }
  int64_t bytes() const;

 private:
  struct Bucket {
    at::Tensor buffer;
    int parameters = 0;  // how many gradients fill it
    int arrived = 0;     // gradients accumulated this step
  };
  void arrived(int bucket);
  void start_ready_buckets();

  Communicator& comm_;
  std::vector<Bucket> buckets_;
  std::vector<std::function<void()>> pending_;       // one finisher per started bucket, in start order
  int next_to_start_ = 0;                            // buckets start in index order on every rank
  std::vector<std::shared_ptr<void>> accumulators_;  // keeps the hooked gradient accumulators alive
};

}  // namespace rn50::parallel
