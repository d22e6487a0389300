// trainer/trainer.h: `rn50 train`: the whole run, from a validated configuration to the last checkpoint.
#pragma once

namespace rn50 {
struct Config;
}

namespace rn50::trainer {

// Trains as configured; throws ConfigError / DataError before training starts when inputs are wrong.
void train(const Config& config);

}  // namespace rn50::trainer
