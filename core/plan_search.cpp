// core/plan_search.cpp: PlanSearch's process-wide scope (torch-free, in every build; its names are the config's).
#include "core/plan_search.h"

#include <atomic>

namespace rn50 {
namespace {

std::atomic<PlanSearch>& in_use() {
  static std::atomic<PlanSearch> search{PlanSearch::kHeuristics};
  return search;
}

}  // namespace

UsePlanSearch::UsePlanSearch(PlanSearch search) : previous_(in_use().exchange(search)) {}
UsePlanSearch::~UsePlanSearch() { in_use().store(previous_); }

PlanSearch current_plan_search() { return in_use().load(); }

}  // namespace rn50
