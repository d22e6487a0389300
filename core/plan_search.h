// core/plan_search.h: PlanSearch, how far fusion: conv looks for each convolution pattern's cuDNN plan, and the scope
// that sets it for the process (torch-free: the config names it, the run's assembly sets it, ops/ reads it).
#pragma once

namespace rn50 {

// kHeuristics: the first 16 configurations cuDNN's heuristics modes A and B list that finalize, each timed;
// kExhaustive: those and, for the typing they chose, every engine that takes the graph with its knobs' settings
// enumerated (ops/cudnn_graph.h's enumerated_plans), each timed: on an H100 ResNet-50's first epoch took 85 s against
// about 18, which the plan cache keeps for the next run.
enum class PlanSearch { kHeuristics, kExhaustive };

// The search the fused convolutions plan with while this lives, process-wide (the weight gradients plan on
// autograd's thread); one at a time. Without one: kHeuristics. Set where the run is assembled.
class UsePlanSearch {
 public:
  explicit UsePlanSearch(PlanSearch search);
  ~UsePlanSearch();
  UsePlanSearch(const UsePlanSearch&) = delete;
  UsePlanSearch& operator=(const UsePlanSearch&) = delete;

 private:
  PlanSearch previous_;
};

// The search in use: the innermost live scope's, else kHeuristics.
PlanSearch current_plan_search();

}  // namespace rn50
