// tests/core/test_plan_search.cpp: PlanSearch's names (the config's) and its scope: heuristics without one, the
// scope's search while it lives, the one before it restored after (nested scopes too), and the value seen from another
// thread.
#include "core/plan_search.h"

#include <gtest/gtest.h>

#include <string>
#include <thread>

#include "core/config.h"

namespace rn50 {
namespace {

TEST(PlanSearch, ScopesSetTheSearchAndRestoreTheOneBefore) {
  EXPECT_EQ(name_of(PlanSearch::kHeuristics), "heuristics");  // the config's names (core/config.h)
  EXPECT_EQ(name_of(PlanSearch::kExhaustive), "exhaustive");
  EXPECT_EQ(current_plan_search(), PlanSearch::kHeuristics);
  {
    const UsePlanSearch outer(PlanSearch::kExhaustive);
    EXPECT_EQ(current_plan_search(), PlanSearch::kExhaustive);
    PlanSearch seen = PlanSearch::kHeuristics;
    std::thread([&] { seen = current_plan_search(); }).join();  // autograd's thread plans the weight gradients
    EXPECT_EQ(seen, PlanSearch::kExhaustive);
    {
      const UsePlanSearch inner(PlanSearch::kHeuristics);
      EXPECT_EQ(current_plan_search(), PlanSearch::kHeuristics);
    }
    EXPECT_EQ(current_plan_search(), PlanSearch::kExhaustive);
  }
  EXPECT_EQ(current_plan_search(), PlanSearch::kHeuristics);
}

}  // namespace
}  // namespace rn50
