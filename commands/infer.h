// commands/infer.h: `rn50 infer`: logits of a batch from a weights file, for checks against other frameworks.
#pragma once

#include <string>

namespace rn50::commands {

struct InferOptions {
  std::string weights;  // torchvision-layout safetensors (rn50 export, or converted from torchvision)
  std::string model;    // registry name; empty: the weights' "model" metadata, else resnet50
  std::string images;   // safetensors file with an F32 tensor "images" [N, 3, H, W], already normalised
  std::string out;      // safetensors file to write, with an F32 tensor "logits" [N, classes]
  std::string device = "cpu";
};

// Runs the model in evaluation mode in true FP32 (no TF32) and writes the logits.
void infer(const InferOptions& options);

}  // namespace rn50::commands
