// tests/support/cuda_test.h: what the GPU tests share: a fixture that skips without a CUDA device and runs on a
// side stream (graph capture refuses the default one), a deterministic-cuDNN scope, and the norm-wise relative error
// against a reference.
#pragma once

#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/cuda.h>

#include "cuda/device_ops.h"

namespace rn50::test {

class CudaTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
    cuda::use_side_stream(0);  // graph capture needs a side stream, and the eager work must run on it too
  }
};

// Deterministic cuDNN for a scope (rn50's fused convolutions then choose reproducible plans and ordered sums), the
// previous setting restored after.
class DeterministicCudnn {
 public:
  DeterministicCudnn() : was_(at::globalContext().deterministicCuDNN()) {
    at::globalContext().setDeterministicCuDNN(true);
  }
  ~DeterministicCudnn() { at::globalContext().setDeterministicCuDNN(was_); }
  DeterministicCudnn(const DeterministicCudnn&) = delete;
  DeterministicCudnn& operator=(const DeterministicCudnn&) = delete;

 private:
  bool was_;
};

// |a - b| / |b| in float64, norm-wise.
inline double rel_err(const at::Tensor& a, const at::Tensor& b) {
  const at::Tensor ad = a.to(at::kDouble), bd = b.to(at::kDouble);
  return (ad - bd).norm().item<double>() / (bd.norm().item<double>() + 1e-30);
}

}  // namespace rn50::test
