// core/cost.cpp: cost arithmetic for `rn50 train --price-per-hour` and `rn50 doctor`.
#include "core/cost.h"

#include <numeric>
#include <stdexcept>

#include "core/log.h"

namespace rn50 {

RunCost run_cost(double price_per_hour, const std::vector<double>& epoch_seconds, int epochs) {
  if (epoch_seconds.empty()) throw std::invalid_argument("run_cost needs at least one epoch time");
  const double mean_s = std::accumulate(epoch_seconds.begin(), epoch_seconds.end(), 0.0) / epoch_seconds.size();
  return {epoch_seconds.back() / 3600.0 * price_per_hour, epochs * mean_s / 3600.0 * price_per_hour};
}

double cost_per_million_images(double price_per_hour, double images_per_s) {
  return price_per_hour / 3600.0 / images_per_s * 1e6;
}

std::string compare_instances(double price_a, double rate_a, double price_b, double rate_b) {
  auto describe = [](const char* name, double price, double rate) {
    if (rate <= 0) return strprintf("%s: %.3g/h, rate unknown (give images/s, e.g. from rn50 doctor)\n", name, price);
    return strprintf("%s: %.3g/h at %.0f img/s: %.4g per million images, %.4g per ImageNet epoch\n", name, price, rate,
                     cost_per_million_images(price, rate),
                     cost_per_million_images(price, rate) * kImageNetTrainImages / 1e6);
  };
  const double break_even = break_even_speedup(price_a, price_b);
  std::string out = describe("A", price_a, rate_a) + describe("B", price_b, rate_b);
  out += strprintf("break-even: A must train %.2fx faster than B to cost the same per image", break_even);
  if (rate_a > 0 && rate_b > 0) {
    const double speedup = rate_a / rate_b;
    out += strprintf("; measured A/B = %.2fx, so A is %s per image", speedup,
                     speedup > break_even   ? "cheaper"
                     : speedup < break_even ? "dearer"
                                            : "as cheap");
  }
  return out + "\n";
}

}  // namespace rn50
