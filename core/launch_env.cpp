// core/launch_env.cpp: parsing of the launchers' rank variables.
#include "core/launch_env.h"

#include <algorithm>
#include <cstdlib>
#include <limits>

#include "core/errors.h"

namespace rn50 {
namespace {

int parse_count(const std::string& name, const std::string& value, int min) {
  size_t used = 0;
  long long x = 0;
  try {
    x = std::stoll(value, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != value.size() || x < min || x > std::numeric_limits<int>::max()) {
    throw ConfigError("environment variable " + name + "='" + value + "' is not a valid number");
  }
  return static_cast<int>(x);
}

}  // namespace

LaunchEnv read_launch_env(const std::function<std::optional<std::string>(const std::string&)>& getenv) {
  struct Names {
    const char* source;
    const char* rank;
    const char* world;
    const char* local;
    const char* local_size;
  };
  const Names launchers[] = {{"torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"},
                             {"slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_NTASKS_PER_NODE"},
                             {"openmpi", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
                              "OMPI_COMM_WORLD_LOCAL_SIZE"}};
  LaunchEnv env;
  for (const auto& names : launchers) {
    const auto world = getenv(names.world);
    if (!world) continue;
    const auto rank = getenv(names.rank);
    if (!rank)
      throw ConfigError(std::string("environment variable ") + names.world + " is set but " + names.rank + " is not");
    env.source = names.source;
    env.world_size = parse_count(names.world, *world, 1);
    env.rank = parse_count(names.rank, *rank, 0);
    const auto local = getenv(names.local);
    env.local_rank = local ? parse_count(names.local, *local, 0) : env.rank;
    if (env.rank >= env.world_size) {
      throw ConfigError(std::string("environment variable ") + names.rank + "=" + *rank + " is not below " +
                        names.world + "=" + *world);
    }
    // Slurm writes "2(x3)" for uneven nodes: then the local count is unknown.
    const auto local_size = getenv(names.local_size);
    if (local_size && local_size->find('(') == std::string::npos) {
      env.local_world_size = parse_count(names.local_size, *local_size, 1);
    }
    env.master_addr = getenv("MASTER_ADDR").value_or("");
    if (const auto port = getenv("MASTER_PORT")) {
      env.master_port = parse_count("MASTER_PORT", *port, 1);
      if (env.master_port > 65535) {  // a TCP port is 16 bits: 70000 once listened on 4464
        throw ConfigError("environment variable MASTER_PORT='" + *port + "' is not a TCP port (1 to 65535)");
      }
    }
    return env;
  }
  return env;
}

int local_processes(const LaunchEnv& env) {
  return env.local_world_size > 0 ? env.local_world_size : std::max(1, env.world_size);
}

LaunchEnv read_launch_env() {
  return read_launch_env([](const std::string& name) -> std::optional<std::string> {
    const char* value = std::getenv(name.c_str());
    return value ? std::optional<std::string>(value) : std::nullopt;
  });
}

std::string cuda_hardware_queues_warning(const char* value) {
  if (value == nullptr) return "";
  char* end = nullptr;
  const long queues = std::strtol(value, &end, 10);
  if (end != value && *end == '\0' && queues >= kGpuDecodeCudaQueues) return "";
  return std::string("CUDA_DEVICE_MAX_CONNECTIONS=") + value + " in this environment, kept by rn50: with fewer than " +
         std::to_string(kGpuDecodeCudaQueues) +
         " hardware queues GPU decoding (--decode gpu) waits behind the training step (on an H200, 14-21% slower "
         "with 8)";
}

std::string widen_cuda_hardware_queues() {
  setenv("CUDA_DEVICE_MAX_CONNECTIONS", std::to_string(kGpuDecodeCudaQueues).c_str(), /*overwrite=*/0);
  const char* value = std::getenv("CUDA_DEVICE_MAX_CONNECTIONS");
  return value ? value : "";  // unset only if setenv failed
}

}  // namespace rn50
