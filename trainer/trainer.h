// trainer/trainer.h: `rn50 train`: the whole run, from a validated configuration to the last checkpoint.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>

namespace rn50 {
struct Config;
struct LaunchEnv;
namespace input {
class InputSource;
}
}  // namespace rn50

namespace rn50::trainer {

// Where a stop signal (core/stop.h) ended a run: its checkpoint resumes at global step `global_step`, `epoch_step`
// steps into epoch `epoch` (0-based; epoch_step 0: at its start). signal 0: the run trained every epoch.
struct StopPoint {
  int signal = 0;
  int64_t epoch = 0;
  int64_t epoch_step = 0;
  int64_t global_step = 0;
};

// What the caller does at points of the run, on rank 0 only. The trainer cannot write the report itself (report/
// comes after trainer/ in the layering), so `rn50 train` hands it in.
struct TrainHooks {
  // After each whole epoch's record and checkpoint, with the epoch (1-based): the page that follows the run. Its
  // errors are its own to handle: one that escapes ends the run.
  std::function<void(int64_t epoch)> epoch_end;
};

// Trains as configured, as one process or as one rank of a data-parallel run (`launch`); throws ConfigError /
// DataError before training starts when inputs are wrong. A stop signal ends it after the step under way, with a
// checkpoint at that step, the stop's record and the start of a report left to the caller.
StopPoint train(const Config& config, const LaunchEnv& launch, const TrainHooks& hooks = {});
// The same on the batches of `source` (tests pass a fake one) instead of the data the configuration names.
StopPoint train(const Config& config, const LaunchEnv& launch, std::unique_ptr<input::InputSource> source,
                const TrainHooks& hooks = {});

}  // namespace rn50::trainer
