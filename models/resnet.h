// models/resnet.h: ResNet v1.5 and ResNeXt (torchvision's layout and parameter names), from depth 18 to 152.
#pragma once

#include <cstdint>
#include <memory>

#include "models/model.h"

namespace rn50::models {

// depth 18 and 34 use basic blocks, 50, 101 and 152 bottlenecks; stride 2 sits in the 3x3 convolution. `groups` and
// `width_per_group` are torchvision's: a bottleneck's 3x3 convolution has int(planes * width_per_group / 64) * groups
// channels in `groups` groups (ResNeXt; resnext50_32x4d is depth 50, 32 groups of 4); basic blocks take neither.
std::shared_ptr<Classifier> make_resnet(int depth, const ModelOptions& options, int64_t groups = 1,
                                        int64_t width_per_group = 64);

}  // namespace rn50::models
