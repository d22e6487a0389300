// models/efficientnet.h: EfficientNet-B0 (torchvision's efficientnet_b0: layout, parameter names, initialisation).
#pragma once

#include <memory>

#include "models/model.h"

namespace rn50::models {

// The stem, 16 MBConv blocks in 7 stages, the 1x1 convolution to 1280 channels and the classifier; stochastic depth
// 0.2 (options.stochastic_depth, as torchvision's stochastic_depth_prob: block k of 16 drops its branch with
// probability 0.2 * k / 16) and dropout 0.2 before the classifier (options.dropout).
std::shared_ptr<Classifier> make_efficientnet_b0(const ModelOptions& options);

}  // namespace rn50::models
