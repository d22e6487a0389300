// tests/ops/test_cudnn_graph_cuda.cpp (GPU machine only): cudnn_graph's enumeration beyond the heuristics: every
// configuration enumerated_plans returns for a data gradient's graph is rebuilt by plan_from_knobs from its engine and
// knob settings alone (what plan_search: exhaustive's plan cache relies on), the engines taken in turn, and settings
// cuDNN does not have, or text that is not knob settings, refused.
#include <gtest/gtest.h>

#include <cstdio>
#include <optional>
#include <set>
#include <vector>

#include "ops/cudnn_graph.h"
#include "ops/cudnn_handle.h"
#include "tests/support/cuda_test.h"

namespace rn50::ops {
namespace {

namespace cg = cudnn_graph;

class CudnnGraphCuda : public test::CudaTest {};

TEST_F(CudnnGraphCuda, EveryEnumeratedPlanIsRebuiltFromItsEngineAndKnobs) {
  const cudnnHandle_t handle = detail::cudnn_handle(0);
  cg::GraphBuilder g;
  const std::vector<int64_t> x{8, 64, 28, 28}, w{64, 64, 3, 3};
  const auto& dy = g.tensor({1, x, cg::nhwc_strides(x), CUDNN_DATA_HALF});
  const auto& wt = g.tensor({2, w, cg::nhwc_strides(w), CUDNN_DATA_HALF});
  const auto& dx = g.tensor({3, x, cg::nhwc_strides(x), CUDNN_DATA_HALF});
  cg::ConvSpec conv;
  conv.padding = {1, 1};
  g.conv_backward_data(dy, wt, dx, conv);
  const cg::Descriptor graph = g.build(handle);

  cg::Enumeration limits;
  limits.max_plans = 48;
  const std::vector<cg::Plan> plans = cg::enumerated_plans(handle, graph, limits);
  std::printf("%zu configurations enumerated\n", plans.size());
  ASSERT_FALSE(plans.empty());
  EXPECT_LE(plans.size(), 48U);
  std::set<int64_t> engines;
  for (const cg::Plan& p : plans) {
    EXPECT_TRUE(p.enumerated);
    EXPECT_FALSE(p.runtime_compiled);
    EXPECT_LE(p.workspace_bytes, limits.max_workspace_bytes);
    engines.insert(p.engine);
    const std::optional<cg::Plan> again = cg::plan_from_knobs(handle, graph, p.engine, p.knobs);
    ASSERT_TRUE(again.has_value()) << "engine " << p.engine << ", knobs " << p.knobs;
    EXPECT_EQ(again->engine, p.engine);
    EXPECT_EQ(again->knobs, p.knobs);
    EXPECT_EQ(again->workspace_bytes, p.workspace_bytes);
  }
  std::printf("%zu engines\n", engines.size());
  // Taken in turn: the first plans are one of each engine.
  std::set<int64_t> first;
  for (size_t i = 0; i < engines.size(); ++i) first.insert(plans[i].engine);
  EXPECT_EQ(first, engines);

  EXPECT_FALSE(cg::plan_from_knobs(handle, graph, 999999, "none").has_value());
  EXPECT_FALSE(cg::plan_from_knobs(handle, graph, -1, plans[0].knobs).has_value());
  for (const char* bad : {"", "1=", "=3", "1=2,", "x", "1=2=3", "99=1", "1=99999999999999999999"}) {
    EXPECT_FALSE(cg::plan_from_knobs(handle, graph, plans[0].engine, bad).has_value()) << bad;
  }
}

}  // namespace
}  // namespace rn50::ops
