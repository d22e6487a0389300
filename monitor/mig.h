// monitor/mig.h: the --mig option: listing a GPU's MIG instances, choosing one, and making it the process's CUDA
// device.
#pragma once

// Torch-free and CUDA-free: everything goes through NvmlApi, so a fake drives the tests.
// `gpu` is NVML's index (nvidia-smi's numbering), which ignores CUDA_VISIBLE_DEVICES.
// rn50 only reads MIG settings: enabling MIG and creating instances are an administrator's job.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "monitor/nvml.h"

namespace rn50::monitor {

struct MigInstance {
  unsigned index = 0;  // position among the GPU's existing instances: what `--mig N` selects
  NvmlDevice device;
  std::string uuid;  // as NVML gives it: "MIG-..." (what CUDA_VISIBLE_DEVICES takes)
  std::string name;  // e.g. "NVIDIA H100 80GB HBM3 MIG 3g.40gb"
  std::optional<uint64_t> memory_bytes;
};

// The GPU's MIG instances in slot order, empty slots skipped; empty when MIG is off or unsupported.
std::vector<MigInstance> list_mig_instances(NvmlApi& nvml, unsigned gpu);

// For `--mig list`: a summary line and a table of index, UUID, name and memory, or one line saying why GPU `gpu`
// has no usable MIG instances (not supported, disabled, waiting for a reset, none created); no final newline.
// Throws ConfigError (key 'mig') only for a GPU index NVML does not have.
std::string describe_mig(NvmlApi& nvml, int gpu);

// Resolves `spec`, a MIG UUID ("MIG-...") or an index into describe_mig's table, to the instance's UUID.
// Throws ConfigError (one line, key 'mig') when MIG is unsupported, disabled or pending a GPU reset on that
// GPU, when it has no instances, or when the UUID or index matches none of them.
std::string select_mig(NvmlApi& nvml, int gpu, const std::string& spec);

// A MIG instance trains with one process: instances have no NVLink or peer-to-peer access, and a process
// sees one instance. Throws ConfigError (key 'mig') when world_size > 1.
void check_mig_compatible(int world_size);

// Makes `mig_uuid` the only CUDA device of this process by setting CUDA_VISIBLE_DEVICES. CUDA reads that
// variable once, when it initialises, and rn50 cannot tell whether that has happened: call this before any
// CUDA or LibTorch CUDA call (device queries included), i.e. right after parsing the configuration.
void apply_mig_choice(const std::string& mig_uuid);

}  // namespace rn50::monitor
