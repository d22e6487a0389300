// trainer/run_info.cpp: the host's facts (its load average among them) and run.json.
#include "trainer/run_info.h"

#include <unistd.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <ctime>
#include <fstream>
#include <sstream>

#include "core/affinity.h"
#include "core/files.h"
#include "core/limits.h"

namespace rn50::trainer {

HostFacts read_host_facts() {
  HostFacts facts;
  std::array<char, 256> name{};
  if (::gethostname(name.data(), name.size() - 1) == 0) facts.host = name.data();
  std::ifstream cpuinfo("/proc/cpuinfo");
  for (std::string line; std::getline(cpuinfo, line);) {
    if (line.rfind("model name", 0) != 0) continue;
    const size_t colon = line.find(':');
    if (colon != std::string::npos) facts.cpu_model = line.substr(line.find_first_not_of(" \t", colon + 1));
    break;
  }
  facts.usable_cores = usable_cores();
  facts.memory_gib = static_cast<double>(physical_memory_bytes()) / (1024.0 * 1024.0 * 1024.0);  // 0 if unknown
  facts.host_cores = static_cast<int>(std::max(1L, ::sysconf(_SC_NPROCESSORS_ONLN)));
  std::ifstream loadavg("/proc/loadavg");
  std::string text;
  std::getline(loadavg, text);
  facts.load_average = parse_load_average(text);
  return facts;
}

std::optional<std::array<double, 3>> parse_load_average(const std::string& text) {
  std::istringstream in(text);
  std::array<double, 3> load{};
  for (double& x : load) {
    if (!(in >> x) || x < 0) return std::nullopt;
  }
  return load;
}

void write_run_info(const std::string& path, int world_size,
                    const std::vector<std::pair<std::string, std::string>>& start_rows) {
  const HostFacts facts = read_host_facts();
  std::array<char, 32> started{};
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  ::gmtime_r(&now, &utc);
  std::strftime(started.data(), started.size(), "%Y-%m-%dT%H:%M:%SZ", &utc);
  nlohmann::json found = nlohmann::json::array();
  for (const auto& [name, value] : start_rows) {
    if (name.size() > 2 && name.front() == '(' && name.back() == ')') found.push_back({name, value});
  }
  const nlohmann::json load = facts.load_average ? nlohmann::json(*facts.load_average) : nlohmann::json();
  const nlohmann::json info{{"started", started.data()},
                            {"host", facts.host},
                            {"cpu", facts.cpu_model},
                            {"usable_cores", facts.usable_cores},
                            {"host_memory_gib", facts.memory_gib},
                            {"host_cores", facts.host_cores},
                            {"load_average", load},
                            {"world_size", world_size},
                            {"found", found}};
  // The start table's rows hold paths, which may be any bytes: what is not UTF-8 shows as U+FFFD (dump would throw).
  const std::string text = info.dump(1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  files::write_atomically(path, text.data(), text.size());
}

}  // namespace rn50::trainer
