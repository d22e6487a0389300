// trainer/session.h: Session, everything one training run holds (device, data parallel, input source, model,
// optimizer, step, schedule, metrics file, monitors), built from the configuration in the order that CUDA graphs and
// data parallel need. Its constructor is the one place where the configuration becomes each part's options; the
// epoch loop (trainer/trainer.cpp) only uses what it built.
#pragma once

#include <c10/core/Device.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "trainer/lr_schedule.h"

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
class PlanCache;
class UsePlanCache;
class UsePlanSearch;
namespace parallel {
class Distributed;
class GradientBuckets;
class Watchdog;
}  // namespace parallel
}  // namespace rn50

namespace rn50::trainer {

// The files a run keeps in out_dir.
inline constexpr char kCheckpointFile[] = "checkpoint.safetensors";
inline constexpr char kBestCheckpointFile[] = "checkpoint_best.safetensors";  // the epoch with the best top-1
inline constexpr char kMetricsFile[] = "metrics.jsonl";

class MetricsLog;
struct ResumePoint;
class Optimizer;
class StepTimer;
class TrainStep;

// What the epoch loop needs of the configuration.
struct LoopOptions {
  int epochs = 90;
  int batch_size = 256;  // per process
  int log_every = 50;
  bool validate = true;
  bool checkpoint = true;
  double price_per_hour = 0;
  std::string out_dir;
  std::string model;  // the checkpoint's metadata
  int64_t seed = 0;
  int dist_timeout_s = 300;  // named in the error of a failed data-parallel run
};

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
  // fusion: conv's timed choices to the plan cache's file where anything was chosen since the last save (after the
  // first epoch, and when the session ends); logs what the file gave and a failure to write.
  void save_plan_cache();
  // Images per step over all ranks.
  int64_t global_batch() const { return static_cast<int64_t>(loop.batch_size) * world(); }

  const LoopOptions loop;
  const c10::Device device;
  std::unique_ptr<parallel::Distributed> distributed;  // declared first: destroyed after everything that uses it
  std::shared_ptr<models::Classifier> model;
  std::unique_ptr<Optimizer> optimizer;
  std::unique_ptr<StepTimer> timer;
  std::unique_ptr<TrainStep> step;
  std::unique_ptr<input::InputSource> source;  // after the step: destroyed before the input tensors it writes into
  std::unique_ptr<parallel::GradientBuckets> buckets;
  std::unique_ptr<parallel::Watchdog> watchdog;  // data parallel: ends a rank whose loop is stuck
  std::unique_ptr<MetricsLog> metrics;           // rank 0 only
  std::unique_ptr<monitor::UtilisationSampler> sampler;
  std::string sampler_status;
  std::string allocator_status;  // what expandable_segments gave, for the start-up table
  std::unique_ptr<PlanCache> plan_cache;         // fusion: conv on a GPU, plan_cache not off
  std::unique_ptr<UsePlanCache> plan_cache_use;  // after it: the ops stop consulting it before it goes
  std::string plan_cache_status;                 // for the start-up table
  std::unique_ptr<UsePlanSearch> plan_search_use;  // plan_search: exhaustive, for the fused convolutions
  LrSchedule schedule;
  int64_t start_epoch = 0;
  int64_t start_epoch_step = 0;  // a checkpoint written mid-epoch: the steps of start_epoch already done
  int64_t global_step = 0;

 private:
  const Config& config_;  // for the start-up table, config.yaml and the ranks' consistency check
  bool plan_cache_reported_ = false;
  void remove_stale_temporaries() const;
  void add_curves(const std::optional<ResumePoint>& resumed);
  void build_model();
  void resume();
  void join_data_parallel();
  void start_sampler();
};

}  // namespace rn50::trainer
