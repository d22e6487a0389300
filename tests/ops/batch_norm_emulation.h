// tests/ops/batch_norm_emulation.h: the launches of ops/batch_norm_kernels.cu emulated on the host, block by block
// and thread by thread, running the same per-thread code (ops/batch_norm_kernels_impl.cuh) as the GPU: for the host
// tests of the BatchNorm kernels and of the max-pool gathered into their backward.
#pragma once

#include <cstdint>
#include <vector>

#include "ops/batch_norm_kernels.h"
#include "ops/batch_norm_kernels_impl.cuh"

namespace rn50::ops::kernels::emulation {

using impl::Idx;

template <typename F>
void for_each_thread(const Plan& p, int grid_y, F&& f) {
  for (int by = 0; by < grid_y; ++by) {
    for (int bx = 0; bx < p.tiles; ++bx) {
      for (int ty = 0; ty < p.row_threads; ++ty) {
        for (int tx = 0; tx < p.lanes; ++tx) f(Idx{tx, ty, bx, by});
      }
    }
  }
}

// A reduction kernel: phase one for every thread of a block, then (after the barrier) the block's partials.
template <int VEC, typename Accumulate>
void emulate_reduce(const Plan& p, float* part_a, float* part_b, Accumulate&& accumulate) {
  std::vector<float> s_a(impl::kThreads * VEC), s_b(impl::kThreads * VEC);
  for (int by = 0; by < p.reduce_blocks; ++by) {
    for (int bx = 0; bx < p.tiles; ++bx) {
      for (int ty = 0; ty < p.row_threads; ++ty) {
        for (int tx = 0; tx < p.lanes; ++tx) accumulate(Idx{tx, ty, bx, by}, s_a.data(), s_b.data());
      }
      for (int tid = 0; tid < p.lanes * p.row_threads; ++tid) {
        impl::block_partials(p, VEC, tid, bx, by, s_a.data(), s_b.data(), part_a, part_b);
      }
    }
  }
}

template <typename Finish>
void emulate_finalize(const Plan& p, const float* part_a, const float* part_b, Finish&& finish) {
  std::vector<double> s_a(impl::kFinalizeChannels * impl::kFinalizeGroups), s_b(s_a.size());
  const int blocks = static_cast<int>(impl::ceil_div(p.channels, impl::kFinalizeChannels));
  for (int bx = 0; bx < blocks; ++bx) {
    for (int ty = 0; ty < impl::kFinalizeGroups; ++ty) {
      for (int tx = 0; tx < impl::kFinalizeChannels; ++tx) {
        impl::finalize_accumulate(p, tx, ty, bx, part_a, part_b, s_a.data(), s_b.data());
      }
    }
    for (int tx = 0; tx < impl::kFinalizeChannels; ++tx) finish(tx, bx, s_a.data(), s_b.data());
  }
}

template <typename T, int VEC>
void emulate_forward(const Plan& p, const ForwardArgs<T>& a) {
  std::vector<float> ws(p.workspace_bytes / sizeof(float));
  float* part_sum = ws.data();
  float* part_sq = part_sum + static_cast<int64_t>(p.reduce_blocks) * p.channels;
  if (a.batch_stats) {
    emulate_reduce<VEC>(p, part_sum, part_sq, [&](const Idx& i, float* s_a, float* s_b) {
      impl::stats_accumulate<T, VEC>(p, i, a.x, s_a, s_b);
    });
    const impl::StatsOut out{a.mean, a.invstd, a.running_mean, a.running_var, a.momentum, a.eps};
    emulate_finalize(p, part_sum, part_sq, [&](int tx, int bx, const double* s_a, const double* s_b) {
      impl::finalize_forward<T>(p, tx, bx, s_a, s_b, a.x, out);
    });
  }
  for_each_thread(p, p.elementwise_blocks, [&](const Idx& i) {
    if (a.silu) {
      impl::normalize_rows<T, VEC, false, false, true>(p, i, a.x, nullptr, a.y, a.weight, a.bias, a.mean, a.invstd);
    } else if (a.residual && a.relu) {
      impl::normalize_rows<T, VEC, true, true>(p, i, a.x, a.residual, a.y, a.weight, a.bias, a.mean, a.invstd,
                                               a.relu_bits);
    } else if (a.residual) {
      impl::normalize_rows<T, VEC, true, false>(p, i, a.x, a.residual, a.y, a.weight, a.bias, a.mean, a.invstd);
    } else if (a.relu) {
      impl::normalize_rows<T, VEC, false, true>(p, i, a.x, nullptr, a.y, a.weight, a.bias, a.mean, a.invstd);
    } else {
      impl::normalize_rows<T, VEC, false, false>(p, i, a.x, nullptr, a.y, a.weight, a.bias, a.mean, a.invstd);
    }
  });
}

// One thread of batch_norm_backward's reduction with ReLU: its mask from relu_bits where given, else from y.
template <typename T, int VEC>
void reduce_relu(const Plan& p, const Idx& i, const BackwardArgs<T>& a, bool store_g, float* s_a, float* s_b) {
  T* g_out = store_g ? a.dresidual : nullptr;
  if constexpr (VEC == 8) {
    if (a.relu_bits != nullptr) {
      if (store_g) {
        impl::backward_accumulate<T, VEC, impl::ReluFrom::kBits, true>(p, i, a.dy, nullptr, a.relu_bits, a.x, a.mean,
                                                                       g_out, s_a, s_b);
      } else {
        impl::backward_accumulate<T, VEC, impl::ReluFrom::kBits, false>(p, i, a.dy, nullptr, a.relu_bits, a.x, a.mean,
                                                                        g_out, s_a, s_b);
      }
      return;
    }
  }
  if (store_g) {
    impl::backward_accumulate<T, VEC, impl::ReluFrom::kY, true>(p, i, a.dy, a.y, nullptr, a.x, a.mean, g_out, s_a, s_b);
  } else {
    impl::backward_accumulate<T, VEC, impl::ReluFrom::kY, false>(p, i, a.dy, a.y, nullptr, a.x, a.mean, g_out, s_a,
                                                                 s_b);
  }
}

template <typename T, int VEC>
void emulate_backward(const Plan& p, const BackwardArgs<T>& a) {
  std::vector<float> ws(p.workspace_bytes / sizeof(float));
  float* part_g = ws.data();
  float* part_gx = part_g + static_cast<int64_t>(p.reduce_blocks) * p.channels;
  const bool store_g = a.relu && a.dresidual != nullptr;
  emulate_reduce<VEC>(p, part_g, part_gx, [&](const Idx& i, float* s_a, float* s_b) {
    if (a.silu) {
      impl::backward_accumulate_silu<T, VEC>(p, i, a.dy, a.x, a.mean, a.weight, a.bias, a.invstd, s_a, s_b);
    } else if (a.relu) {
      reduce_relu<T, VEC>(p, i, a, store_g, s_a, s_b);
    } else {
      impl::backward_accumulate<T, VEC, impl::ReluFrom::kNone, false>(p, i, a.dy, nullptr, nullptr, a.x, a.mean,
                                                                      nullptr, s_a, s_b);
    }
  });
  const impl::GradOut out{a.invstd, a.dweight, a.dbias};
  emulate_finalize(p, part_g, part_gx, [&](int tx, int bx, const double* s_a, const double* s_b) {
    impl::finalize_backward(p, tx, bx, s_a, s_b, out);
  });
  const impl::DxCoefficients co{a.weight, a.mean, a.invstd, a.dweight, a.dbias, a.batch_stats, a.bias};
  for_each_thread(p, p.elementwise_blocks, [&](const Idx& i) {
    if (a.silu) {
      impl::dx_rows<T, VEC, impl::GradSource::kDySilu>(p, i, a.dy, nullptr, a.x, co, a.dx);
    } else if (store_g) {
      impl::dx_rows<T, VEC, impl::GradSource::kStored>(p, i, a.dresidual, nullptr, a.x, co, a.dx);
    } else if (a.relu) {
      impl::dx_rows<T, VEC, impl::GradSource::kDyMasked>(p, i, a.dy, a.y, a.x, co, a.dx);
    } else {
      impl::dx_rows<T, VEC, impl::GradSource::kDy>(p, i, a.dy, nullptr, a.x, co, a.dx);
    }
  });
}

// batch_norm_backward_pooled: the passes of emulate_backward without an activation: the reduction over `po`'s rows
// (impl::pooled_reduce_plan: the pool's outputs) reading the gradient through `reduce_grad` (pool_impl::PoolMaskedGrad)
// and x at `reduce_x` (x at each output's max), then dx over p's rows through `dx_grad` (pool_impl::PoolGatherGrad).
template <typename T, int VEC, class ReduceGrad, class DxGrad>
void emulate_backward_from(const Plan& p, const Plan& po, const BackwardArgs<T>& a, const ReduceGrad& reduce_grad,
                           const T* reduce_x, const DxGrad& dx_grad) {
  std::vector<float> ws(p.workspace_bytes / sizeof(float));
  float* part_g = ws.data();
  float* part_gx = part_g + static_cast<int64_t>(po.reduce_blocks) * po.channels;
  emulate_reduce<VEC>(po, part_g, part_gx, [&](const Idx& i, float* s_a, float* s_b) {
    impl::backward_accumulate_from<T, VEC, impl::ReluFrom::kNone, false>(po, i, reduce_grad, nullptr, nullptr, reduce_x,
                                                                         a.mean, nullptr, s_a, s_b);
  });
  const impl::GradOut out{a.invstd, a.dweight, a.dbias};
  emulate_finalize(po, part_g, part_gx, [&](int tx, int bx, const double* s_a, const double* s_b) {
    impl::finalize_backward(po, tx, bx, s_a, s_b, out);
  });
  const impl::DxCoefficients co{a.weight, a.mean, a.invstd, a.dweight, a.dbias, a.batch_stats, a.bias};
  const Plan pd = impl::pooled_dx_plan(p);
  for_each_thread(pd, pd.elementwise_blocks, [&](const Idx& i) {
    impl::dx_rows_from<T, VEC, impl::GradSource::kDy>(pd, i, dx_grad, nullptr, a.x, co, a.dx);
  });
}

}  // namespace rn50::ops::kernels::emulation
