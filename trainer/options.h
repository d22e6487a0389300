// trainer/options.h: each part's options built from the configuration: the one place where a Config becomes what the
// input sources, the model, the step, the optimizer, data parallel, the schedule and the epoch loop take (Session
// calls it).
#pragma once

#include <c10/core/ScalarType.h>

#include <cstdint>

#include "input/source.h"
#include "models/model.h"
#include "parallel/distributed.h"
#include "trainer/lr_schedule.h"
#include "trainer/optimizer.h"
#include "trainer/session.h"
#include "trainer/train_step.h"

namespace rn50 {
struct Config;
struct LaunchEnv;
enum class Precision;
}  // namespace rn50

namespace rn50::trainer {

// The dtype the step computes in and its input arrives in: half or bfloat16 under autocast, float32 otherwise.
at::ScalarType compute_dtype(Precision precision);

// The input's options for this process of `launch`: its decode budget is decode_memory_mb, or its share of the
// memory with the other processes of the launch on this host.
input::InputOptions input_options(const Config& config, const LaunchEnv& launch);
// The model's options; `world`: the processes of a data-parallel run (batched_casts stays off with more than one).
models::ModelOptions model_options(const Config& config, int64_t num_classes, int world = 1);
// wgrad_stream resolved: on and off as set; auto is on, but off where nvJPEG decodes beside the step (decode: gpu on a
// folder, whatever decode_cpu_share leaves it): the graph's second-stream branches held its hardware calls for a whole
// step (docs/gpu-decoding.md).
bool weight_gradients_beside(const Config& config);
StepOptions step_options(const Config& config);
// The optimizer for `model`: its no-decay names come from the model (unless decay_bn_and_bias).
OptimizerOptions optimizer_options(const Config& config, const models::Classifier& model);
parallel::DistributedOptions distributed_options(const Config& config);
LoopOptions loop_options(const Config& config);
// The schedule for a run of `global_batch` images a step and `steps_per_epoch` steps (the peak rate scaled).
LrSchedule schedule_for(const Config& config, int64_t global_batch, int64_t steps_per_epoch);

}  // namespace rn50::trainer
