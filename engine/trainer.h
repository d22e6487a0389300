// engine/trainer.h: `rn50 train`: the whole run, from a validated configuration to the last checkpoint.
#pragma once

namespace rn50 {
struct Config;
struct LaunchEnv;
}

namespace rn50::engine {

// Trains as configured, as one process or as one rank of a data-parallel run (`launch`); throws ConfigError /
// DataError before training starts when inputs are wrong.
void train(const Config& config, const LaunchEnv& launch);

}  // namespace rn50::engine
