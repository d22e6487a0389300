// models/model.cpp: what every model shares: its parameters in channels-last memory.
#include <torch/utils.h>

#include "models/model.h"

namespace rn50::models {

void to_channels_last(torch::nn::Module& model) {
  torch::NoGradGuard no_grad;
  for (auto& p : model.parameters()) {
    if (p.dim() == 4) p.set_data(p.contiguous(at::MemoryFormat::ChannelsLast));
  }
}

}  // namespace rn50::models
