// models/model.cpp: what every model shares: its parameters in channels-last memory, the fused ops' plan context.
#include <torch/utils.h>

#include "models/model.h"
#include "ops/fused_conv.h"

namespace rn50::models {

void to_channels_last(torch::nn::Module& model) {
  torch::NoGradGuard no_grad;
  for (auto& p : model.parameters()) {
    if (p.dim() == 4) p.set_data(p.contiguous(at::MemoryFormat::ChannelsLast));
  }
}

std::string fusion_plan_context() { return ops::fused_conv_plan_context(); }

}  // namespace rn50::models
