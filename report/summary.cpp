// report/summary.cpp: epoch medians and the configuration in words.
#include "report/summary.h"

#include <algorithm>
#include <sstream>

#include "core/errors.h"
#include "core/log.h"

namespace rn50::report {
namespace {

std::optional<double> median_of(const std::vector<Record>& epochs, const std::string& key) {
  std::vector<double> values;
  for (const auto& e : epochs) {
    if (const auto v = e.get(key)) values.push_back(*v);
  }
  return median(values);
}

}  // namespace

std::vector<Record> measured_epochs(const std::vector<Record>& epochs, bool* first_dropped) {
  std::vector<Record> measured;
  for (const auto& e : epochs) {
    if (!e.warm_up) measured.push_back(e);
  }
  const bool drop = !measured.empty() && measured.size() < epochs.size();
  if (first_dropped) *first_dropped = drop;
  return drop ? measured : epochs;
}

EpochsSummary summarise(const std::vector<Record>& epochs, const std::string& source) {
  if (epochs.empty()) throw DataError(source + ": no epoch record (the run ended before its first epoch)");
  EpochsSummary s;
  s.epochs = epochs.size();
  std::vector<double> rates, waits, comm;
  bool graphed = true;
  for (const auto& e : epochs) {
    const auto rate = e.get("images_per_s");
    if (!rate || *rate <= 0) {
      throw DataError(strprintf("%s: epoch %.0f has no positive images_per_s (not a metrics record of rn50 train)",
                                source.c_str(), e.get("epoch").value_or(0)));
    }
    rates.push_back(*rate);
    const auto wall = e.get("wall_s"), wait = e.get("data_wait_s");
    if (wall && *wall > 0 && wait) waits.push_back(*wait / *wall);
    const auto steps = e.get("steps"), communication = e.get("communication_s");
    if (steps && *steps > 0 && communication) comm.push_back(*communication / *steps * 1e3);
    graphed = graphed && e.get("cuda_graph").value_or(0) > 0;
  }
  s.images_per_s = *median(rates);
  s.data_wait_share = median(waits);
  s.communication_ms_per_step = median(comm);
  s.cuda_graph = graphed;
  for (const auto& column : utilisation_columns()) {
    s.util.*column.member = median_of(epochs, std::string(column.metric) + "_mean");
  }
  return s;
}

std::string setting(const Settings& settings, const std::string& key) {
  for (const auto& [k, v] : settings) {
    if (k == key) return v;
  }
  return "";
}

Settings settings_of_command(const std::string& command) {
  std::vector<std::string> words;
  std::istringstream in(command);
  for (std::string w; in >> w;) words.push_back(w);
  Settings out;
  for (size_t i = 0; i < words.size(); ++i) {
    if (words[i].rfind("--", 0) != 0 || words[i].size() < 3) continue;
    std::string key = words[i].substr(2), value = "on";
    const size_t eq = key.find('=');
    if (eq != std::string::npos) {
      value = key.substr(eq + 1);
      key = key.substr(0, eq);
    } else if (i + 1 < words.size() && words[i + 1].rfind("--", 0) != 0) {
      value = words[++i];
    }
    std::replace(key.begin(), key.end(), '-', '_');
    out.emplace_back(key, value);
  }
  return out;
}

SwitchFacts switch_facts(const Settings& settings) {
  SwitchFacts f;
  f.precision = setting(settings, "precision");
  f.tf32 = setting(settings, "tf32");
  f.fusion = setting(settings, "fusion");
  if (!setting(settings, "cuda_graph").empty()) f.cuda_graph = setting(settings, "cuda_graph") == "on";
  if (!setting(settings, "channels_last").empty()) f.channels_last = setting(settings, "channels_last") == "on";
  return f;
}

std::string data_kind(const Settings& settings) {
  const std::string data = setting(settings, "data");
  return data == "synthetic" ? "synthetic" : data.empty() ? "" : "jpeg";
}

std::string describe_switches(const Settings& settings) {
  std::vector<std::string> parts;
  const std::string precision = setting(settings, "precision");
  if (!precision.empty()) parts.push_back(precision == "fp32" ? "fp32" : precision + " autocast");
  const std::string tf32 = setting(settings, "tf32");
  if (!tf32.empty()) parts.push_back("TF32 " + tf32);
  const std::string cl = setting(settings, "channels_last");
  if (!cl.empty()) parts.push_back(cl == "on" ? "channels-last" : "NCHW");
  if (setting(settings, "cudnn_benchmark") == "on") parts.emplace_back("cuDNN autotune");
  const std::string graph = setting(settings, "cuda_graph");
  if (!graph.empty()) parts.push_back(graph == "on" ? "CUDA graph" : "eager");
  if (setting(settings, "fusion") == "bn") parts.emplace_back("fused BatchNorm+add+ReLU");
  if (data_kind(settings) == "jpeg") {
    if (setting(settings, "decode") == "gpu") {
      parts.emplace_back("GPU decoding");
    } else {
      const std::string workers = setting(settings, "workers");
      const std::string threads = workers == "0"    ? "decoding on the training thread"
                                  : workers == "-1" ? "a decode thread per core"
                                                    : workers + " decode threads";
      parts.push_back(threads + (setting(settings, "pin_memory") == "off" ? ", pageable memory" : ", pinned memory"));
    }
  }
  std::string out;
  for (const auto& p : parts) out += (out.empty() ? "" : ", ") + p;
  return out;
}

}  // namespace rn50::report
