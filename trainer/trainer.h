// trainer/trainer.h: `rn50 train`: the whole run, from a validated configuration to the last checkpoint.
#pragma once

#include <memory>

namespace rn50 {
struct Config;
struct LaunchEnv;
namespace input {
class InputSource;
}
}  // namespace rn50

namespace rn50::trainer {

// Trains as configured, as one process or as one rank of a data-parallel run (`launch`); throws ConfigError /
// DataError before training starts when inputs are wrong.
void train(const Config& config, const LaunchEnv& launch);
// The same on the batches of `source` (tests pass a fake one) instead of the data the configuration names.
void train(const Config& config, const LaunchEnv& launch, std::unique_ptr<input::InputSource> source);

}  // namespace rn50::trainer
