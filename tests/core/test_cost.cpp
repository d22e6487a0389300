// tests/core/test_cost.cpp: cost per epoch, projected run cost, cost per million images, break-even speed-up.
#include <gtest/gtest.h>

#include <stdexcept>

#include "core/cost.h"

namespace rn50 {
namespace {

TEST(Cost, EpochCostIsItsHoursTimesThePrice) {
  // 30 min at 3.2/h; projected: 90 epochs at the mean of 30 and 40 min (35 min).
  const RunCost c = run_cost(3.2, {1800.0, 2400.0}, 90);
  EXPECT_DOUBLE_EQ(c.per_epoch, 2400.0 / 3600.0 * 3.2);
  EXPECT_DOUBLE_EQ(c.projected_run, 90 * 2100.0 / 3600.0 * 3.2);
  const RunCost one = run_cost(2.0, {3600.0}, 10);
  EXPECT_DOUBLE_EQ(one.per_epoch, 2.0);
  EXPECT_DOUBLE_EQ(one.projected_run, 20.0);
  EXPECT_THROW(run_cost(1.0, {}, 10), std::invalid_argument);
}

TEST(Cost, CostPerMillionImages) {
  // 3.6/h at 1000 img/s: 1e6 images take 1000 s, a thousandth of 3.6 per second.
  EXPECT_DOUBLE_EQ(cost_per_million_images(3.6, 1000), 1.0);
  EXPECT_DOUBLE_EQ(cost_per_million_images(0.44, 500), 0.44 / 3600.0 / 500 * 1e6);
}

TEST(Cost, CompareGivesTheSourcesBreakEven) {
  // The source: an A100 at 3.2/h against an RTX 3090 at 0.44/h breaks even at 3.2 / 0.44 = 7.27x.
  const std::string unknown_rates = compare_instances(3.2, 0, 0.44, 0);
  EXPECT_NE(unknown_rates.find("7.27x faster"), std::string::npos) << unknown_rates;
  EXPECT_NE(unknown_rates.find("rate unknown"), std::string::npos) << unknown_rates;
  EXPECT_EQ(unknown_rates.find("measured"), std::string::npos) << unknown_rates;

  // 2500 against 900 img/s: 0.3556 and 0.1358 per million images; 2.78x < 7.27x, so the A100 is dearer.
  const std::string measured = compare_instances(3.2, 2500, 0.44, 900);
  EXPECT_NE(measured.find("A: 3.2/h at 2500 img/s: 0.3556 per million images"), std::string::npos) << measured;
  EXPECT_NE(measured.find("B: 0.44/h at 900 img/s: 0.1358 per million images"), std::string::npos) << measured;
  EXPECT_NE(measured.find("measured A/B = 2.78x, so A is dearer"), std::string::npos) << measured;
  EXPECT_NE(compare_instances(3.2, 8000, 0.44, 900).find("so A is cheaper"), std::string::npos);
}

}  // namespace
}  // namespace rn50
