// tests/core/test_run_boundary.cpp: the runs of one metrics file told apart: a fresh run's start record begins one,
// a resume's continues it, and files from before start records are told apart by numbering that goes back.
#include "core/run_boundary.h"

#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

namespace rn50 {
namespace {

struct Line {
  std::string type;
  std::optional<double> epoch, step;
  bool fresh = false;
};

// Whether each line begins a run.
std::vector<bool> starts(const std::vector<Line>& lines) {
  RunBoundary runs;
  std::vector<bool> out;
  for (const auto& l : lines) out.push_back(runs.starts_run(l.type, l.epoch, l.step, l.fresh));
  return out;
}

TEST(RunBoundary, AFreshStartBeginsARunAndAResumeContinuesIt) {
  EXPECT_EQ(starts({{"start", 0, 0, true},
                    {"step", 1, 5},
                    {"epoch", 1, std::nullopt},
                    {"stop", 2, 7},
                    {"start", 1, 5, false},
                    {"step", 2, 10},
                    {"epoch", 2, std::nullopt},
                    {"start", 0, 0, true},
                    {"start", 0, 0, true}}),
            (std::vector<bool>{true, false, false, false, false, false, false, true, true}));
}

TEST(RunBoundary, WithoutStartRecordsNumberingThatGoesBackBeginsARun) {
  EXPECT_EQ(starts({{"step", 1, 2},
                    {"epoch", 1, std::nullopt},
                    {"step", 2, 4},
                    {"epoch", 2, std::nullopt},
                    {"step", 1, 2},  // the step and the epoch go back
                    {"epoch", 1, std::nullopt},
                    {"epoch", 1, std::nullopt}}),  // an epoch again
            (std::vector<bool>{true, false, false, false, true, false, true}));
  // A step record at or below the last step, in a later epoch (another run with another log_every): a run.
  EXPECT_EQ(starts({{"step", 1, 8}, {"step", 2, 8}}), (std::vector<bool>{true, true}));
}

TEST(RunBoundary, AFreshStartResetsTheNumbering) {
  RunBoundary runs;
  EXPECT_TRUE(runs.starts_run("epoch", 3, std::nullopt, false));
  EXPECT_TRUE(runs.starts_run("start", 0, 0, true));
  EXPECT_FALSE(runs.starts_run("epoch", 1, std::nullopt, false));  // epoch 1 of the new run, not a third run
  EXPECT_EQ(runs.runs(), 2);
}

}  // namespace
}  // namespace rn50
