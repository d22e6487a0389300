// doctor/pipeline_verdict.h: the doctor's data-pipeline verdict: can the CPU, or GPU decoding, feed the model at
// the rate it trains (torch-free).
#pragma once

#include <optional>
#include <string>

#include "doctor/rows.h"

namespace rn50::doctor {

struct PipelineRates {                 // images/s, as the doctor measured them
  double cpu_all_cores = 0;            // JPEG decode + augmentation on every usable core
  double cpu_per_core = 0;             // ... on one
  int cores = 1;                       // the cores this process may use
  double model = 0;                    // the model's training on synthetic data (rn50 doctor --model): what it consumes
  std::optional<double> gpu_decode;    // decode: gpu's stage alone, where this build and device could measure it
  std::string gpu_decode_unavailable;  // why decode: gpu cannot run here, when it cannot (empty: it can, or unknown)
  // What training with decode: gpu would get, from the decode measured beside the model's own step
  // (gpu_decode_in_training); where measured, the verdict's GPU rate instead of gpu_decode.
  std::optional<double> gpu_decode_beside_step;
};

// The images/s a training run with decode: gpu gets, at most the model's `model_rate` with batches of `batch`: the
// step's time plus what a decode queued beside a step of `step_alone_ms` added to it (`batch_ms`, a batch
// decoded and cropped with that step queued, as training submits it; bench-decode --step-model). The decode alone
// overstates it: on an H200 with 8 cores it measured 21,876 images/s where training got about 8,400 (the decoder
// thread's hardware-decode calls beside the step; docs/doctor.md).
double gpu_decode_in_training(double model_rate, int batch, double step_alone_ms, double batch_ms);

// With decode_cpu_share: auto the decode threads decode `threads_rate` images/s of the model's `model_rate` (their
// share of each batch), the GPU decoder the rest, so the time GPU decoding alone added to the step
// (`gpu_in_training`, gpu_decode_in_training's rate) shrinks by the threads' share. On 8 cores of an H200: a doctor
// all-core rate of 4,738 gives the threads 3,198 (36%; the run decoded 35.7% on the threads), and GPU decoding's
// 8,296 in training becomes 8,527 against the 8,445 measured (docs/doctor.md).
double gpu_decode_with_cpu_share(double model_rate, double gpu_in_training, double threads_rate);

// GPU decoding "keeps up" when training with it comes within this fraction of the model's rate: the JPEG goal's 3%
// (bench/results/README.md). A rate measured beside the step cannot exceed the model's, so the margin is needed.
constexpr double kKeepsUpShareOfModel = 0.97;

// The share of the decode benchmark's all-core rate that a training run's loader delivers on the same cores: the
// training thread, the copies and the loader's hand-offs take the rest. From one H200 machine (16 cores; the
// evidence in docs/doctor.md): 4 data-bound loader threads fed about 1,030 images/s each where the benchmark would
// decode about 1,140 a core on those 35 KiB files (0.9); 16 threads with a decode rate 1.116 times the model's
// trained 1.2% below synthetic data (0.9 x 1.116 = 1.004: at the edge). bench/gpu_session.sh's datapath stage
// measures it directly.
constexpr double kLoaderShareOfDecodeRate = 0.9;

// ok when the CPU keeps up with that share; warn ("tight") when the benchmark's rate reaches the model's but the
// loader's share would not; bad when even the benchmark's does not. warn and bad say how many decode threads would
// keep up and whether GPU decoding would: measured beside the step, when it comes within kKeepsUpShareOfModel of the
// model's rate; measured alone, when it is above the model's rate (it shares the GPU with the step); or GPU decoding
// with the decode threads beside it (decode_cpu_share: auto, on all cores but two).
ReportRow data_pipeline_verdict(const PipelineRates& rates);

}  // namespace rn50::doctor
