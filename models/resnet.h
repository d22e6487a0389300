// models/resnet.h: ResNet v1.5 (torchvision's layout and parameter names), from depth 18 to 152.
#pragma once

#include <memory>

#include "models/model.h"

namespace rn50::models {

// depth 18 and 34 use basic blocks, 50, 101 and 152 bottlenecks; stride 2 sits in the 3x3 convolution.
std::shared_ptr<Classifier> make_resnet(int depth, const ModelOptions& options);

}  // namespace rn50::models
