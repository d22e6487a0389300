// models/vit.h: ViT-B/16 (torchvision's vit_b_16: layout, parameter names, initialisation).
#pragma once

#include <memory>

#include "models/model.h"

namespace rn50::models {

// 16x16 patches of 224x224 images (196 tokens and the class token), 12 encoder layers of width 768 with 12 heads
// and an MLP of 3072; dropout 0 (options.dropout: torchvision's `dropout`, everywhere it applies it). Other image
// sizes are refused: the position embedding holds 197 tokens.
std::shared_ptr<Classifier> make_vit_b_16(const ModelOptions& options);

}  // namespace rn50::models
