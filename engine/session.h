// engine/session.h: Session, everything one training run holds (device, data parallel, input source, model,
// optimizer, step, schedule, metrics file, monitors), built from the configuration in the order that CUDA graphs and
// data parallel need. The epoch loop (engine/trainer.cpp) only uses it.
#pragma once

#include <c10/core/Device.h>

#include <cstdint>
#include <memory>
#include <string>

#include "engine/lr_schedule.h"

namespace rn50 {
struct Config;
struct LaunchEnv;
namespace models {
class Classifier;
}
namespace input {
class InputSource;
}
namespace monitor {
class UtilisationSampler;
}
namespace parallel {
class Distributed;
class GradientBuckets;
class Watchdog;
}  // namespace parallel
}  // namespace rn50

namespace rn50::engine {

// The files a run keeps in out_dir.
inline constexpr char kCheckpointFile[] = "checkpoint.safetensors";
inline constexpr char kMetricsFile[] = "metrics.jsonl";

class MetricsLog;
class Sgd;
class StepTimer;
class TrainStep;

struct Session {
  // `source`: the input to train on; null opens the one the configuration names (input::create_input_source).
  // Throws ConfigError / DataError before training when the configuration, data or device cannot run.
  Session(const Config& config, const LaunchEnv& launch, std::unique_ptr<input::InputSource> source = nullptr);
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  int world() const;
  int rank() const;
  bool primary() const { return rank() == 0; }
  // Tells the data-parallel watchdog that the loop moved.
  void beat();
  // BatchNorm statistics differ per rank (each saw its own batches): validation and checkpoints use the mean.
  void average_buffers();
  // After the last epoch of a data-parallel run: graphs that captured collectives go before the communicators.
  void close_data_parallel();
  // The start-up table: the resolved configuration and what the run found.
  void log_start() const;

  const Config& config;
  const c10::Device device;
  std::unique_ptr<parallel::Distributed> distributed;  // declared first: destroyed after everything that uses it
  std::shared_ptr<models::Classifier> model;
  std::unique_ptr<Sgd> sgd;
  std::unique_ptr<StepTimer> timer;
  std::unique_ptr<TrainStep> step;
  std::unique_ptr<input::InputSource> source;  // after the step: destroyed before the input tensors it writes into
  std::unique_ptr<parallel::GradientBuckets> buckets;
  std::unique_ptr<parallel::Watchdog> watchdog;  // data parallel: ends a rank whose loop is stuck
  std::unique_ptr<MetricsLog> metrics;           // rank 0 only
  std::unique_ptr<monitor::UtilisationSampler> sampler;
  std::string sampler_status;
  std::string allocator_status;  // what expandable_segments gave, for the start-up table
  LrSchedule schedule;
  int64_t start_epoch = 0;
  int64_t global_step = 0;

 private:
  void remove_stale_temporaries() const;
  void build_model();
  void resume();
  void join_data_parallel();
  void start_sampler();
};

}  // namespace rn50::engine
