// core/plan_search.cpp: PlanSearch's names and its process-wide scope (torch-free, in every build).
#include "core/plan_search.h"

#include <atomic>

namespace rn50 {
namespace {

std::atomic<PlanSearch>& in_use() {
  static std::atomic<PlanSearch> search{PlanSearch::kHeuristics};
  return search;
}

}  // namespace

const char* to_string(PlanSearch search) {
  switch (search) {
    case PlanSearch::kHeuristics:
      return "heuristics";
    case PlanSearch::kExhaustive:
      return "exhaustive";
  }
  return "?";
}

UsePlanSearch::UsePlanSearch(PlanSearch search) : previous_(in_use().exchange(search)) {}
UsePlanSearch::~UsePlanSearch() { in_use().store(previous_); }

PlanSearch current_plan_search() { return in_use().load(); }

}  // namespace rn50
