// trainer/checkpoint.h: checkpoints (model, optimizer state, progress, class list), written atomically.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/safetensors.h"

namespace torch::nn {
class Module;
}

namespace rn50::trainer {

class Optimizer;

struct CheckpointMeta {
  std::string model;
  int64_t epoch = 0;  // epochs completed
  int64_t step = 0;   // optimizer steps completed
  int64_t seed = 0;
  std::vector<std::string> classes;
  int64_t batch_size = 0;  // per process; a resumed run must match it to continue the schedule
  int64_t steps_per_epoch = 0;
  std::string optimizer = "sgd";  // whose state the checkpoint holds (Optimizer::name)
  // Steps done of epoch `epoch` (0-based) when the run stopped mid-epoch (a stop signal); 0 at an epoch's end. Always
  // step == epoch * steps_per_epoch + epoch_step.
  int64_t epoch_step = 0;
};

using NamedTensors = std::vector<std::pair<std::string, at::Tensor>>;

// Named state beyond the model and optimizer (the fp16 loss scaler's scale and growth tracker).
using ExtraState = NamedTensors;

// The model's parameters then buffers, by name: what a checkpoint holds of the model.
NamedTensors named_state(const torch::nn::Module& model);

// Writes PATH.tmp, then renames it over PATH, so a crash leaves the previous checkpoint intact.
void save_checkpoint(const std::string& path, torch::nn::Module& model, const Optimizer& optimizer,
                     const CheckpointMeta& meta, const ExtraState& extra = {});

// Reads only the metadata; throws rn50::ConfigError when a value is out of range, or when the step is not the epochs
// done times the steps per epoch (checkpoints are written at an epoch's end).
CheckpointMeta read_checkpoint_meta(const std::string& path);

// Loads weights, buffers and the optimizer's state into the existing model and optimizer (on their device).
// Throws rn50::ConfigError naming the path and the tensor when something is missing or mis-shaped, and naming the key
// `optimizer` when the checkpoint holds another optimizer's state.
// Extra state is restored where the checkpoint has it (a run may switch precision when it resumes).
CheckpointMeta load_checkpoint(const std::string& path, torch::nn::Module& model, Optimizer& optimizer,
                               const ExtraState& extra = {});

// Starts `model` from a weights file in torchvision's layout (an `rn50 export` file, a converted torchvision
// state dict, or an rn50 checkpoint). Every parameter and buffer must be there with its shape, except
// that when the classifier's shapes differ (another class count) the classifier keeps its fresh
// initialisation: the start of fine-tuning (a classifier of the right shape in another dtype is an error, no class
// count). Extra tensors other than an rn50 checkpoint's optimizer state are an error. Errors name the tensors. Returns
// what was done, for the log. With new_classifier false a classifier that differs is an error too (evaluating a fresh
// classifier would print meaningless logits).
std::string load_weights(const std::string& path, torch::nn::Module& model, const std::string& classifier_name,
                         bool new_classifier = true);
// The same from a file already read (rn50 infer reads it first for its classifier's shape: once, not twice); `path`
// names it in errors. A BatchNorm's num_batches_tracked that the file lacks starts at 0, as torchvision's
// load_state_dict fills it in (state dicts saved before PyTorch 0.4.1 have none).
std::string load_weights(const safetensors::File& file, const std::string& path, torch::nn::Module& model,
                         const std::string& classifier_name, bool new_classifier = true);

// Writes the model tensors of a checkpoint (no optimizer state) with the class list and model name in
// the metadata: what `rn50 export` produces, loadable by torchvision in one line. Throws rn50::ConfigError, naming
// them, when the tensors are not those of the model the checkpoint names (built from the registry with its class
// count): missing, mis-shaped, of another dtype, or extra. Returns the checkpoint's metadata.
CheckpointMeta export_weights(const std::string& checkpoint_path, const std::string& out_path);

}  // namespace rn50::trainer
