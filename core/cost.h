// core/cost.h: what training costs at an hourly price (any currency): per epoch, per run, per million
// images, and the break-even speed-up of one instance over another (torch-free).
#pragma once

#include <string>
#include <vector>

namespace rn50 {

inline constexpr double kImageNetTrainImages = 1281167;

struct RunCost {
  double per_epoch = 0;      // the last epoch: its wall time in hours * price
  double projected_run = 0;  // all `epochs` at the mean epoch time so far
};

// `epoch_seconds`: the wall times of the epochs so far, the last one being the epoch just finished (not empty).
RunCost run_cost(double price_per_hour, const std::vector<double>& epoch_seconds, int epochs);

// The speed-up an instance at price_a per hour must reach over one at price_b to cost the same per image.
inline double break_even_speedup(double price_a, double price_b) { return price_a / price_b; }

// Seconds of one ImageNet-1k training epoch (kImageNetTrainImages) at `images_per_s`, validation not included.
inline double imagenet_epoch_seconds(double images_per_s) { return kImageNetTrainImages / images_per_s; }

// Price of training on a million images at `images_per_s`.
double cost_per_million_images(double price_per_hour, double images_per_s);

// Instances A and B (price per hour, measured images/s or 0 when unknown): each one's cost per million
// images where its rate is known, and the break-even speed-up of A over B (price_a / price_b). Several lines.
std::string compare_instances(double price_a, double rate_a, double price_b, double rate_b);

}  // namespace rn50
