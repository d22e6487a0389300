// models/convnext.h: ConvNeXt-Tiny (torchvision's convnext_tiny: layout, parameter names, initialisation).
#pragma once

#include <memory>

#include "models/model.h"

namespace rn50::models {

// Stages of 3, 3, 9 and 3 blocks at 96, 192, 384 and 768 channels; stochastic depth 0.1 at the deepest block
// (options.stochastic_depth, as torchvision's stochastic_depth_prob), rising linearly from 0 at the first.
std::shared_ptr<Classifier> make_convnext_tiny(const ModelOptions& options);

}  // namespace rn50::models
