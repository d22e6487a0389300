// parallel/distributed.h: joining a data-parallel run: rendezvous through a TCP store, the process group
// (NCCL with a GPU per rank, Gloo on CPUs and shared GPUs), and the checks that every rank runs the same thing.
#pragma once

#include <c10/core/Device.h>

#include <memory>
#include <string>
#include <vector>

#include "core/launch_env.h"
#include "parallel/communicator.h"

namespace rn50::parallel {

struct DistributedOptions {
  int timeout_s = 300;  // dist_timeout_s: the rendezvous and every collective wait at most this long for a rank
  // dist_backend. kAuto: NCCL when every rank has a GPU of its own, shared host memory (parallel/shm_group.h) when
  // ranks share one (NCCL refuses two ranks on one device), Gloo on the CPU. Gloo on GPUs and shared memory copy each
  // bucket through host memory and wait on the host, so a step that uses them cannot be captured in a CUDA graph.
  enum class Backend { kAuto, kNccl, kGloo, kShm };
  Backend backend = Backend::kAuto;
};

// Where a rank trains, as choose_backend compares them: its host's name and its GPU's UUID (empty: the CPU).
struct RankDevice {
  std::string host;
  std::string gpu;
};
// The backend ("nccl", "gloo" or "shm") for ranks on `devices`, in rank order: Gloo on the CPU, NCCL on GPUs unless
// two ranks share one, then shared memory; `why` says why. Throws ConfigError for NCCL asked on the CPU or on a
// shared GPU, shared memory asked across hosts, and ranks mixing the CPU and GPUs.
std::string choose_backend(DistributedOptions::Backend asked, const std::vector<RankDevice>& devices,
                           std::string* why);

class Distributed {
 public:
  // Joins the run that `launch` describes (world_size > 1): rank 0 serves the store at MASTER_ADDR:MASTER_PORT
  // (127.0.0.1:29500 by default) and every rank waits up to options.timeout_s for the others. Throws
  // ConfigError when the run cannot be joined (no backend for the device, a rank that never comes).
  Distributed(const LaunchEnv& launch, const DistributedOptions& options, c10::Device device);
  ~Distributed();
  Distributed(const Distributed&) = delete;
  Distributed& operator=(const Distributed&) = delete;

  int rank() const { return launch_.rank; }
  int world_size() const { return launch_.world_size; }
  Communicator& comm() { return *comm_; }
  // Why the backend in use was chosen (for the start-up table).
  const std::string& backend_reason() const { return backend_reason_; }
  // Closes the communicators (after the last collective, and after CUDA graphs that captured collectives
  // are gone). The destructor calls it too.
  void shutdown();

  // Every rank passes its own `text` (for example its resolved configuration, one "key: value" per line);
  // throws ConfigError on every rank when any rank's differs from rank 0's, naming the rank and the lines.
  void check_same(const std::string& what, const std::string& text);
  // Every rank's `value`, in rank order, on every rank (through the store: no device work).
  std::vector<double> all_values(const std::string& what, double value);

 private:
  // Every rank's `mine`, in rank order, through the store (each call's keys are its own).
  std::vector<std::string> exchange(const std::string& what, const std::string& mine);

  struct Impl;
  LaunchEnv launch_;
  std::unique_ptr<Impl> impl_;
  std::unique_ptr<Communicator> comm_;
  int64_t exchanges_ = 0;  // makes each exchange's store keys unique
  std::string backend_reason_;
};

// A textual fingerprint of a model: every parameter and buffer with its shape and dtype, one per line.
std::string describe_tensors(const std::vector<std::pair<std::string, at::Tensor>>& named);

}  // namespace rn50::parallel
