// report/compare.cpp: reading result files into rows, checking that they compare, and the table and pictures.
#include "report/compare.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <set>
#include <sstream>

#include "core/cost.h"
#include "core/errors.h"
#include "core/files.h"
#include "core/log.h"
#include "core/utf8.h"
#include "report/svg.h"

namespace rn50::report {
namespace {

namespace fs = std::filesystem;

// An ablation.json is one JSON document, read whole and parsed into memory several times its size: bench/ablation.py
// writes a few hundred KB (the largest recorded is 0.5 MB).
constexpr uint64_t kMaxAblationBytes = 16 << 20;

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

std::string trim(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t\r\"'");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t\r\"'") - b + 1);
}

// "NVIDIA H200 (sm_90, 132 SMs, 140 GiB), driver ..." -> "H200".
std::string gpu_model(const std::string& device_row) {
  std::string model = device_row.substr(0, device_row.find(" ("));
  if (model.rfind("NVIDIA ", 0) == 0) model = model.substr(7);
  return model;
}

std::string name_given(const CompareOptions& o, const std::string& input) {
  for (const auto& [path, name] : o.names) {
    if (path == input) return name;
  }
  return "";
}

std::string cpu_machine(const std::string& cores) {
  return cores.empty() ? std::string("CPU") : "CPU (" + cores + " cores)";
}

std::vector<double> rates_of(const std::vector<Record>& records) {
  std::vector<double> rates;
  for (const auto& r : records) {
    if (const auto rate = r.get("images_per_s"); rate && *rate > 0) rates.push_back(*rate);
  }
  return rates;
}

// The step records of the measured epochs, each epoch's first left out: its interval holds the epoch's start (the
// loader filling up, a graph's capture).
std::vector<Record> steady_steps(const std::vector<Record>& steps, const std::vector<Record>& epochs) {
  std::set<double> measured, seen;
  for (const auto& e : epochs) measured.insert(e.get("epoch").value_or(-1));
  std::vector<Record> out;
  for (const auto& s : steps) {
    const auto epoch = s.get("epoch");
    if (!epoch || !measured.count(*epoch) || seen.insert(*epoch).second) continue;
    out.push_back(s);
  }
  return out;
}

// The row's spread: of its measured epochs' rates where there are two or more, else of its step records'.
void set_spread(CompareRow& row, const std::vector<Record>& epochs, const std::vector<Record>& steps) {
  std::vector<double> rates = rates_of(epochs);
  row.spread_of = "epochs";
  if (rates.size() < 2) {
    rates = rates_of(steady_steps(steps, epochs));
    row.spread_of = "step records";
  }
  const std::optional<double> middle = median(rates);
  if (rates.size() < 2 || !middle || *middle <= 0) {
    row.spread_of.clear();
    return;
  }
  const auto [slowest, fastest] = std::minmax_element(rates.begin(), rates.end());
  row.slowest = *slowest;
  row.fastest = *fastest;
  row.spread = (*fastest - *slowest) / *middle;
}

// The rows of one run folder (one configuration).
CompareRow row_of_run(const std::string& input, const CompareOptions& o) {
  const RunFolder run = read_run_folder(input);
  if (run.config.empty()) {
    throw DataError(input + ": no config.yaml and no start table in train.log: model, batch and switches unknown");
  }
  CompareRow row;
  row.configuration = run_name(input);
  const Settings& settings = run.config;
  row.model = setting(settings, "model");
  row.image_size = std::atoi(setting(settings, "image_size").c_str());
  row.batch = std::atoi(setting(settings, "batch_size").c_str());
  row.data = data_kind(settings);
  row.cuda = run.cuda;
  row.processes = run.world_size;
  bool dropped = false;
  const std::vector<Record> epochs = measured_epochs(run.metrics.epochs, &dropped);
  row.figures = summarise(epochs, input);
  row.figures.first_dropped = dropped;
  set_spread(row, epochs, run.metrics.steps);
  row.load_average = run.load_average;
  row.load_cores = run.load_cores;
  for (const Record& e : epochs) {
    const std::optional<double> others = e.get("others_cpu_cores");
    if (others && (!row.others_cores || *others > *row.others_cores)) row.others_cores = others;
  }
  if (run.machine_from.empty() && !epochs.empty()) {
    int ranks = 0;  // runs without run.json or a start table: the per-rank input waits tell the processes
    while (epochs.front().has("data_wait_s_rank" + std::to_string(ranks))) ++ranks;
    row.processes = std::max(1, ranks);
  }
  row.switches = describe_switches(settings);
  row.facts = switch_facts(settings);
  row.device = run.cuda ? run.found("device") : run.found("cpu");
  std::string machine = name_given(o, input);
  if (machine.empty()) {
    if (run.cuda && run.found("device").empty()) {
      throw DataError(input + ": the run names no GPU (no run.json, no device row in train.log): name it with --name " +
                      input + "=NAME");
    }
    machine = run.cuda ? gpu_model(run.found("device")) + " x" + std::to_string(row.processes)
                       : cpu_machine(run.found("usable_cores"));
  }
  row.machine = machine;
  if (row.device.empty()) row.device = "device not recorded in the run folder; named '" + machine + "' by --name";
  row.source =
      input + " (" + std::to_string(row.figures.epochs) + " epoch" + (row.figures.epochs == 1 ? "" : "s") +
      (dropped ? " after the first" : "") + "; configuration from " + run.config_from +
      (run.machine_from.empty() ? "" : ", machine from " + run.machine_from) +
      (run.metrics.long_lines ? "; " + std::to_string(run.metrics.long_lines) + " metrics lines over 1 MiB skipped"
                              : "") +
      ")";
  return row;
}

// The device row an ablation recorded, or the one in its logs/ (the runs' start tables), or "".
std::string ablation_device(const nlohmann::json& saved, const std::string& input) {
  if (saved["machine"].is_object() && saved["machine"].contains("gpu") && saved["machine"]["gpu"].is_string()) {
    return saved["machine"]["gpu"].get<std::string>();
  }
  std::error_code ec;
  const fs::path logs = fs::path(input).parent_path() / "logs";
  if (!fs::is_directory(logs, ec)) return "";
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(logs, ec)) files.push_back(entry.path());
  std::sort(files.begin(), files.end());
  for (const auto& f : files) {
    Rows table;
    try {
      table = read_start_table(f.string());
    } catch (const files::ReadError&) {
      continue;  // not a log (a folder, a FIFO) or unreadable: the other logs may say
    }
    for (const auto& [key, value] : table) {
      if (key == "(device)" && value != "cpu") return value;
    }
  }
  return "";
}

Record record_of(const nlohmann::json& j) {
  Record r;
  for (const auto& [key, value] : j.items()) {
    if (value.is_number()) r.fields[key] = value.get<double>();
    if (value.is_null()) r.fields[key] = std::nullopt;
  }
  return r;
}

// The rows an ablation.json gives: the chosen labels at the chosen batches on the chosen data.
std::vector<CompareRow> rows_of_ablation(const std::string& input, const CompareOptions& o) {
  std::vector<uint8_t> bytes;
  try {
    files::read_whole(input, kMaxAblationBytes, bytes);
  } catch (const files::ReadError& e) {
    throw DataError(e.what());
  }
  const nlohmann::json saved = nlohmann::json::parse(bytes.begin(), bytes.end(), nullptr, false);
  if (!saved.is_object() || !saved.contains("runs") || !saved["runs"].is_array() || !saved.contains("machine")) {
    throw DataError(input + ": not an ablation.json of bench/ablation.py (no 'machine' and 'runs')");
  }
  std::set<int> batches;
  for (const auto& r : saved["runs"]) {
    if (!r.is_object() || !r.contains("label") || !r.contains("batch") || !r["batch"].is_number_integer() ||
        !r.contains("data") || !r.contains("epochs") || !r.contains("command") || !r["command"].is_string()) {
      throw DataError(input + ": a run without label, batch, data, command and epochs (not an ablation.json)");
    }
    const int64_t batch = r["batch"].get<int64_t>();
    if (batch < 1 || batch > (int64_t{1} << 24)) {
      throw DataError(input + ": a run of batch " + std::to_string(batch) + " (not an ablation.json's)");
    }
    if (r["data"] == o.data) batches.insert(static_cast<int>(batch));
  }
  std::vector<int> wanted = o.batches;
  if (wanted.empty()) wanted.assign(batches.rbegin(), batches.rend());
  if (wanted.empty()) throw DataError(input + ": no run on " + o.data + " data (--data synthetic or jpeg)");
  const std::string device = ablation_device(saved, input);
  std::vector<CompareRow> rows;
  for (const int batch : wanted) {
    for (const auto& label : o.labels) {
      const nlohmann::json* run = nullptr;
      for (const auto& r : saved["runs"]) {
        if (r["label"] == label && r["batch"] == batch && r["data"] == o.data) run = &r;
      }
      const std::string which = "'" + label + "' at batch " + std::to_string(batch) + " on " + o.data + " data";
      if (!run) throw DataError(input + ": no " + which + " (--label, --batch, --data choose the runs)");
      const auto code = run->find("exit_code");
      if (code == run->end() || !code->is_number_integer()) {
        throw DataError(input + ": the run " + which + " has no integer 'exit_code' (not an ablation.json)");
      }
      if (*code != 0) {
        throw DataError(input + ": the run " + which + " failed (exit " + code->dump() + "): nothing measured");
      }
      if (!(*run)["epochs"].is_array() || (*run)["epochs"].empty()) {
        throw DataError(input + ": the run " + which + " has no list of measured epochs");
      }
      CompareRow row;
      const Settings settings = settings_of_command((*run)["command"].get<std::string>());
      row.configuration = label;
      row.model = setting(settings, "model");
      row.image_size = std::atoi(setting(settings, "image_size").c_str());
      row.batch = batch;
      row.data = o.data;
      row.cuda = setting(settings, "device").rfind("cuda", 0) == 0;
      std::vector<Record> epochs;
      for (const auto& e : (*run)["epochs"]) epochs.push_back(record_of(e));
      row.figures = summarise(epochs, input + ": " + which);
      row.figures.first_dropped = true;  // ablation.py keeps the warm-up epoch apart ("warmup_epoch")
      set_spread(row, epochs, {});
      row.switches = describe_switches(settings);
      row.facts = switch_facts(settings);
      row.device = device;
      std::string machine = name_given(o, input);
      if (machine.empty()) {
        if (row.cuda && device.empty()) {
          throw DataError(input +
                          ": the ablation names no GPU (made before ablation.py recorded it, no logs/): name "
                          "it with --name " +
                          input + "=NAME");
        }
        machine = row.cuda ? gpu_model(device) + " x1" : "CPU";
      }
      row.machine = machine;
      if (row.device.empty()) row.device = "device not recorded in the file; named '" + machine + "' by --name";
      row.source = input + ": ablation run '" + label + "', batch " + std::to_string(batch) + ", " + o.data + " (" +
                   std::to_string(row.figures.epochs) + " epochs after the warm-up epoch)";
      rows.push_back(std::move(row));
    }
  }
  return rows;
}

std::vector<std::pair<std::string, double>> read_prices_file(const std::string& path) {
  std::vector<uint8_t> bytes;
  try {
    files::read_whole(path, 1 << 20, bytes);
  } catch (const files::ReadError& e) {
    throw ConfigError(std::string("--prices: ") + e.what());
  }
  std::vector<std::pair<std::string, double>> prices;
  std::string text(bytes.begin(), bytes.end());
  if (text.compare(0, 3, "\xEF\xBB\xBF") == 0) text.erase(0, 3);  // a byte-order mark, as editors on Windows save
  std::istringstream lines(text);
  int n = 0;
  for (std::string line; std::getline(lines, line);) {
    ++n;
    line = line.substr(0, line.find('#'));
    if (trim(line).empty()) continue;
    const size_t colon = line.rfind(':');
    if (colon == std::string::npos) {
      throw ConfigError(strprintf("--prices %s line %d: expected 'NAME: PRICE' (per GPU-hour)", path.c_str(), n));
    }
    const std::string name = trim(line.substr(0, colon)), value = trim(line.substr(colon + 1));
    char* end = nullptr;
    const double price = std::strtod(value.c_str(), &end);
    if (name.empty() || value.empty() || *end != '\0' || !(price > 0) || !std::isfinite(price)) {
      throw ConfigError(strprintf("--prices %s line %d: '%s' is not a positive price", path.c_str(), n, value.c_str()));
    }
    prices.emplace_back(name, price);
  }
  return prices;
}

// The rows must measure the same work: the same model at the same image size on the same kind of data.
void check_comparable(const std::vector<CompareRow>& rows) {
  if (rows.empty()) throw ConfigError("the result files gave no rows to compare (--label names no configuration?)");
  const CompareRow& first = rows.front();
  for (const auto& r : rows) {
    auto refuse = [&](const char* what, const std::string& a, const std::string& b, const char* why) {
      throw DataError(std::string("rows differ in ") + what + ": " + a + " (" + first.source + ") against " + b + " (" +
                      r.source + "): " + why);
    };
    if (r.model != first.model) refuse("model", first.model, r.model, "images/s of different models do not compare");
    if (r.image_size != first.image_size) {
      refuse("image size", std::to_string(first.image_size), std::to_string(r.image_size),
             "images/s at different sizes do not compare");
    }
    if (r.data != first.data) {
      refuse("data", first.data, r.data, "compare like with like (--data picks an ablation's synthetic or jpeg runs)");
    }
  }
}

size_t find_reference(const std::vector<CompareRow>& rows, const std::string& reference) {
  if (reference.empty()) return 0;
  if (reference.find_first_not_of("0123456789") == std::string::npos) {
    const long n = std::atol(reference.c_str());
    if (n < 1 || static_cast<size_t>(n) > rows.size()) {
      throw ConfigError("--reference " + reference + ": there are rows 1 to " + std::to_string(rows.size()));
    }
    return static_cast<size_t>(n - 1);
  }
  std::vector<size_t> matches;
  for (size_t i = 0; i < rows.size(); ++i) {
    if (lower(rows[i].machine + " " + rows[i].configuration).find(lower(reference)) != std::string::npos) {
      matches.push_back(i);
    }
  }
  if (matches.size() == 1) return matches.front();
  std::string listed;
  for (const size_t i : matches) listed += (listed.empty() ? "" : ", ") + std::to_string(i + 1);
  throw ConfigError("--reference '" + reference + "' " +
                    (matches.empty() ? "matches no row's machine or configuration"
                                     : "matches rows " + listed + ": give a row number"));
}

std::string hours_text(double seconds) {
  if (seconds < 2 * 3600) return strprintf("%.1f min", seconds / 60);
  if (seconds < 72 * 3600) return strprintf("%.1f h", seconds / 3600);
  return strprintf("%.1f days", seconds / 86400);
}

// Images/s with the digits that matter: a CPU's 0.73 is not "1".
// Beyond the usual range (a forged 1e300, a price of 1e-300) in exponent form, never as hundreds of digits or 0.000.
std::string rate_text(double x) {
  if (x >= 1e9 || (x > 0 && x < 0.01)) return strprintf("%.3g", x);
  return strprintf(x >= 100 ? "%.0f" : x >= 10 ? "%.1f" : "%.2f", x);
}

std::string money(double x) {
  if (x >= 1e9 || (x > 0 && x < 0.001)) return strprintf("%.3g", x);
  return strprintf(x >= 100 ? "%.0f" : x >= 1 ? "%.2f" : "%.3f", x);
}

// A ratio: "0.00x" hid a CPU row's speed-up over an H200.
std::string times_text(double x) { return x > 0 && x < 0.01 ? strprintf("%.2gx", x) : strprintf("%.2fx", x); }

std::string opt_pct(const std::optional<double>& share) {
  return share ? strprintf("%.1f%%", 100 * *share) : std::string("unavailable");
}

std::string allreduce_text(const CompareRow& r) {
  if (r.processes <= 1) return "- (one process)";
  if (r.figures.communication_ms_per_step) return strprintf("%.2f ms", *r.figures.communication_ms_per_step);
  return r.figures.cuda_graph ? "inside the CUDA graph" : "unavailable";
}

// "2 (H200 x1, baseline, batch 256)": rows of one machine differ in configuration or batch.
int gpus_of(const CompareRow& r) { return r.cuda ? std::max(1, r.processes) : 1; }

std::string row_name(const CompareRow& r, size_t i) {
  return strprintf("%zu (%s, %s, batch %d)", i + 1, r.machine.c_str(), r.configuration.c_str(), r.batch);
}

nlohmann::json opt(const std::optional<double>& x) { return x ? nlohmann::json(*x) : nlohmann::json(); }

bool any_price(const Comparison& c) {
  return std::any_of(c.rows.begin(), c.rows.end(), [](const CompareRow& r) { return r.price_per_hour.has_value(); });
}

std::string pct(double share) { return strprintf("%.0f%%", 100 * share); }

// "host was busy with other work while it trained (other processes kept 1.5 of its 2 cores busy)", or from the load
// average before the run where its epochs do not say: "host was loaded when it started (load average 3.9 on 2 cores)".
std::string load_text(const CompareRow& r) {
  if (r.others_cores) {
    return strprintf("host was busy with other work while it trained (other processes kept %.1f of its %d cores busy)",
                     *r.others_cores, r.load_cores);
  }
  return strprintf("host was loaded when it started (load average %.1f on %d cores)", *r.load_average, r.load_cores);
}

}  // namespace

std::vector<std::string> noise_warnings(const std::vector<CompareRow>& rows, size_t reference) {
  std::vector<std::string> out;
  for (size_t i = 0; i < rows.size(); ++i) {
    const CompareRow& r = rows[i];
    if (r.spread && *r.spread > kWideSpread) {
      out.push_back(
          strprintf("the %s of row %s spread by %s (%s to %s img/s): its images/s are uncertain by about as "
                    "much",
                    r.spread_of.c_str(), row_name(r, i).c_str(), pct(*r.spread).c_str(), rate_text(r.slowest).c_str(),
                    rate_text(r.fastest).c_str()));
    }
  }
  const CompareRow& ref = rows[reference];
  if (rows.size() == 1 && ref.loaded()) {
    out.push_back("row " + row_name(ref, reference) + ": its " + load_text(ref) +
                  ": its images/s are a loaded machine's");
  }
  for (size_t i = 0; i < rows.size(); ++i) {
    if (i == reference) continue;
    const CompareRow& r = rows[i];
    const double ratio = r.figures.images_per_s / ref.figures.images_per_s;
    const std::string differ = strprintf("images/s of row %s and row %s differ by %.2fx", row_name(r, i).c_str(),
                                         row_name(ref, reference).c_str(), std::max(ratio, 1 / ratio));
    std::vector<std::string> loaded;
    if (r.loaded()) loaded.push_back(strprintf("row %zu's ", i + 1) + load_text(r));
    if (ref.loaded()) loaded.push_back(strprintf("row %zu's ", reference + 1) + load_text(ref));
    if (!loaded.empty()) {
      out.push_back(differ + ", but " + loaded.front() + (loaded.size() > 1 ? " and " + loaded.back() : "") +
                    ": the ratio measures the load as much as the machines");
      continue;
    }
    // Within the rows' own noise: each row's rate could lie anywhere in its spread.
    const double noise = r.spread.value_or(0) + ref.spread.value_or(0);
    if (noise > 0 && std::max(ratio, 1 / ratio) - 1 <= noise) {
      std::string spreads;
      for (const size_t k : {i, reference}) {
        if (!rows[k].spread) continue;
        spreads += (spreads.empty() ? "" : ", ") +
                   strprintf("row %zu's %s %s", k + 1, rows[k].spread_of.c_str(), pct(*rows[k].spread).c_str());
      }
      out.push_back(differ + ", within the spread of the rows' own rates (" + spreads + "): not a measured difference");
    }
  }
  return out;
}

Projection project(double images_per_s, int epochs, int gpus, std::optional<double> price_per_gpu_hour) {
  Projection p;
  p.epoch_s = imagenet_epoch_seconds(images_per_s);
  p.run_s = p.epoch_s * epochs;
  if (price_per_gpu_hour) {
    p.price_per_hour = *price_per_gpu_hour * std::max(1, gpus);
    p.cost_per_epoch = *p.price_per_hour * p.epoch_s / 3600;
    p.cost_per_run = *p.price_per_hour * p.run_s / 3600;
  }
  return p;
}

std::optional<double> price_for(const std::vector<std::pair<std::string, double>>& prices, const std::string& machine) {
  std::optional<double> found;
  size_t longest = 0;
  const std::string m = lower(machine);
  for (const auto& [name, price] : prices) {
    const std::string n = lower(trim(name));
    const bool whole_words = m.compare(0, n.size(), n) == 0 && (m.size() == n.size() || m[n.size()] == ' ');
    if (!n.empty() && whole_words && n.size() > longest) found = price, longest = n.size();
  }
  return found;
}

Comparison compare(const CompareOptions& o) {
  if (o.inputs.empty()) throw ConfigError("rn50 compare needs result files: ablation.json files or run folders");
  if (o.data != "synthetic" && o.data != "jpeg") throw ConfigError("--data '" + o.data + "' is not synthetic or jpeg");
  if (o.epochs < 1) throw ConfigError("--epochs must be at least 1");
  if (o.labels.empty()) throw ConfigError("--label names no configuration (e.g. --label baseline,all)");
  std::set<std::string> seen;
  Comparison c;
  c.epochs = o.epochs;
  for (const auto& input : o.inputs) {
    std::error_code ec;
    const std::string canonical = fs::canonical(input, ec).string();
    if (!seen.insert(ec ? input : canonical).second) throw DataError(input + ": given twice");
    const fs::file_status status = fs::status(input, ec);
    if (ec && ec != std::errc::no_such_file_or_directory) throw DataError("cannot read " + input + ": " + ec.message());
    if (fs::is_directory(status)) {
      c.rows.push_back(row_of_run(input, o));
    } else if (fs::exists(status)) {
      for (auto& row : rows_of_ablation(input, o)) c.rows.push_back(std::move(row));  // names a FIFO or a device
    } else {
      throw DataError(input + ": no such file or folder");
    }
  }
  for (const auto& [path, name] : o.names) {
    if (std::find(o.inputs.begin(), o.inputs.end(), path) == o.inputs.end()) {
      throw ConfigError("--name " + path + "=" + name + ": " + path + " is not among the result files");
    }
  }
  check_comparable(c.rows);
  std::vector<std::pair<std::string, double>> prices = o.prices;
  if (!o.prices_file.empty()) {
    for (auto& p : read_prices_file(o.prices_file)) prices.push_back(std::move(p));
  }
  for (size_t i = 0; i < prices.size(); ++i) {  // two prices for one name: which was meant is not for rn50 to guess
    for (size_t j = 0; j < i; ++j) {
      if (lower(trim(prices[i].first)) == lower(trim(prices[j].first))) {
        throw ConfigError("price for '" + trim(prices[i].first) + "' given twice (" +
                          strprintf("%g and %g", prices[j].second, prices[i].second) + ")");
      }
    }
  }
  for (const auto& entry : prices) {  // not a structured binding: clang's C++17 does not capture those
    const std::string& name = entry.first;
    const bool used = std::any_of(c.rows.begin(), c.rows.end(),
                                  [&](const CompareRow& r) { return price_for({entry}, r.machine).has_value(); });
    if (!used) {
      std::string machines;
      for (const auto& r : c.rows) {
        if (machines.find("'" + r.machine + "'") == std::string::npos)
          machines += (machines.empty() ? "" : ", ") + ("'" + r.machine + "'");
      }
      throw ConfigError("price for '" + name + "': no machine of that name (the machines: " + machines + ")");
    }
  }
  c.reference = find_reference(c.rows, o.reference);
  for (auto& r : c.rows) {
    r.price_per_gpu_hour = price_for(prices, r.machine);
    const Projection p = project(r.figures.images_per_s, o.epochs, r.cuda ? r.processes : 1, r.price_per_gpu_hour);
    r.epoch_s = p.epoch_s;
    r.run_s = p.run_s;
    r.price_per_hour = p.price_per_hour;
    r.cost_per_epoch = p.cost_per_epoch;
    r.cost_per_run = p.cost_per_run;
    r.reading = read_utilisation(r.cuda, r.figures.util, r.figures.data_wait_share, r.facts);
  }
  const CompareRow& ref = c.rows[c.reference];
  std::vector<NamedFigures> named;
  for (size_t i = 0; i < c.rows.size(); ++i) {
    CompareRow& r = c.rows[i];
    r.speedup = r.figures.images_per_s / ref.figures.images_per_s;
    if (r.price_per_hour && ref.price_per_hour)
      r.break_even = break_even_speedup(*r.price_per_hour, *ref.price_per_hour);
    named.push_back({"row " + row_name(r, i), r.figures.images_per_s / gpus_of(r), r.figures.util});
  }
  // NVML's figures are each one GPU's (rank 0's): several GPUs' rows are read by their rate per GPU.
  const bool several = std::any_of(c.rows.begin(), c.rows.end(), [](const CompareRow& r) { return gpus_of(r) > 1; });
  c.across = read_across(named, several);
  c.warnings = noise_warnings(c.rows, c.reference);
  return c;
}

namespace {

// Text from a file or a folder's name as Markdown shows it: valid UTF-8 on one line, its table bars, tags, code,
// links and emphasis escaped ('_' only emphasises between words, and sm_90 stays readable) (a '|' in a folder name
// added a column to every table, a newline split its row).
std::string markdown_text(const std::string& text) {
  std::string out;
  for (const char ch : utf8::replace_invalid(text)) {
    const auto u = static_cast<unsigned char>(ch);
    if (u < 0x20 || u == 0x7f) {
      out += ' ';
    } else if (std::strchr("\\`*[]<>|", ch)) {
      out += '\\';
      out += ch;
    } else {
      out += ch;
    }
  }
  return out;
}

// The comparison with its texts escaped for Markdown.
Comparison escaped_for_markdown(Comparison c) {
  for (auto& r : c.rows) {
    for (std::string* field :
         {&r.source, &r.machine, &r.device, &r.configuration, &r.switches, &r.model, &r.data, &r.reading}) {
      *field = markdown_text(*field);
    }
  }
  for (auto& w : c.warnings) w = markdown_text(w);
  c.across = markdown_text(c.across);
  return c;
}

}  // namespace

std::string comparison_markdown(const Comparison& escaped) {
  const Comparison c = escaped_for_markdown(escaped);
  const CompareRow& ref = c.rows[c.reference];
  std::vector<std::string> l;
  l.emplace_back("# Machines side by side");
  l.emplace_back("");
  l.push_back(
      strprintf("%zu rows. Reference: row %s. An ImageNet epoch is %s training images (validation not "
                "included), at each row's measured images/s; the run is %d epochs.",
                c.rows.size(), row_name(ref, c.reference).c_str(), "1,281,167", c.epochs));
  if (!c.warnings.empty()) {
    l.insert(l.end(), {"", "## Warnings", ""});
    for (const auto& w : c.warnings) l.push_back("- **" + w + "**");
  }
  if (!c.across.empty()) l.insert(l.end(), {"", "**" + c.across + "**"});
  l.insert(
      l.end(),
      {"", "## Speed", "",
       "| # | machine | configuration | data | batch x processes | images/s | per GPU | speed-up | ImageNet epoch" +
           (ref.image_size > 0 ? strprintf(" at %d px", ref.image_size) : std::string()) + " | " +
           std::to_string(c.epochs) + " epochs | data wait | all-reduce after backward, per step |",
       "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"});
  for (size_t i = 0; i < c.rows.size(); ++i) {
    const CompareRow& r = c.rows[i];
    l.push_back(strprintf("| %zu | %s | %s | %s | %d x %d | %s | %s | %s | %s | %s | %s | %s |", i + 1,
                          r.machine.c_str(), r.configuration.c_str(), r.data.c_str(), r.batch, r.processes,
                          rate_text(r.figures.images_per_s).c_str(),
                          r.cuda ? rate_text(r.figures.images_per_s / gpus_of(r)).c_str() : "-",
                          times_text(r.speedup).c_str(), hours_text(r.epoch_s).c_str(), hours_text(r.run_s).c_str(),
                          opt_pct(r.figures.data_wait_share).c_str(), allreduce_text(r).c_str()));
  }
  std::string head = "| # | machine | configuration |", rule = "| --- | --- | --- |";
  for (const auto& col : utilisation_columns()) head += std::string(" ") + col.heading + " |", rule += " --- |";
  l.insert(l.end(), {"", "## Utilisation", "",
                     "Medians of the epoch means, of rank 0's GPU where there are several. NVML's GPU utilisation is "
                     "what nvidia-smi shows: the share of time in which any kernel ran; SM activity, occupancy, "
                     "tensor-pipe activity and DRAM bandwidth come from GPM (Hopper and newer). All-reduce after "
                     "backward: the gradient all-reduce's time left once the backward pass is done (eager steps; "
                     "inside forward+backward under a CUDA graph).",
                     "", head, rule});
  for (size_t i = 0; i < c.rows.size(); ++i) {
    const CompareRow& r = c.rows[i];
    std::string line = strprintf("| %zu | %s | %s |", i + 1, r.machine.c_str(), r.configuration.c_str());
    for (const auto& col : utilisation_columns()) line += " " + format_figure(col, r.figures.util.*col.member) + " |";
    l.push_back(line);
  }
  l.insert(l.end(), {"", "What the figures say:", ""});
  for (size_t i = 0; i < c.rows.size(); ++i) {
    l.push_back(strprintf("%zu. **%s, %s** (%s): %s", i + 1, c.rows[i].machine.c_str(), c.rows[i].configuration.c_str(),
                          c.rows[i].switches.c_str(), c.rows[i].reading.c_str()));
  }
  l.insert(l.end(), {"", "## Cost", ""});
  if (!any_price(c)) {
    l.emplace_back(
        "No prices given: `--price NAME=P` or `--prices FILE` (per GPU-hour) add the cost of an epoch and "
        "of the run, and the break-even speed-up over the reference.");
  } else {
    l.push_back(
        "Price per hour: the price per GPU-hour times the GPUs (a CPU machine's: per machine-hour). "
        "Break-even: the speed-up over the reference at which both cost the same per image.");
    l.insert(l.end(), {"",
                       "| # | machine | configuration | price per hour | per ImageNet epoch | " +
                           std::to_string(c.epochs) + " epochs | break-even speed-up | measured speed-up | per image |",
                       "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"});
    for (size_t i = 0; i < c.rows.size(); ++i) {
      const CompareRow& r = c.rows[i];
      if (!r.price_per_hour) {
        l.push_back(strprintf("| %zu | %s | %s | no price | | | | %s | |", i + 1, r.machine.c_str(),
                              r.configuration.c_str(), times_text(r.speedup).c_str()));
        continue;
      }
      std::string verdict = "-";
      if (i == c.reference) {
        verdict = "reference";
      } else if (r.break_even) {
        verdict = r.speedup > *r.break_even ? "cheaper" : r.speedup < *r.break_even ? "dearer" : "the same";
      }
      l.push_back(strprintf("| %zu | %s | %s | %s (%d x %s) | %s | %s | %s | %s | %s |", i + 1, r.machine.c_str(),
                            r.configuration.c_str(), money(*r.price_per_hour).c_str(), r.cuda ? r.processes : 1,
                            money(*r.price_per_gpu_hour).c_str(), money(*r.cost_per_epoch).c_str(),
                            money(*r.cost_per_run).c_str(), r.break_even ? times_text(*r.break_even).c_str() : "-",
                            times_text(r.speedup).c_str(), verdict.c_str()));
    }
  }
  l.insert(l.end(), {"", "## Pictures", "", "![images/s](throughput.svg)", "", "![utilisation](utilisation.svg)"});
  if (any_price(c)) l.insert(l.end(), {"", "![cost of the run](cost.svg)"});
  l.insert(l.end(), {"", "## Where each row comes from", ""});
  for (size_t i = 0; i < c.rows.size(); ++i) {
    const CompareRow& r = c.rows[i];
    l.push_back(strprintf("%zu. %s; %s, %d px; %s%s", i + 1, r.source.c_str(), r.model.c_str(), r.image_size,
                          r.device.empty() ? "device unrecorded" : r.device.c_str(),
                          r.switches.empty() ? "" : ("; " + r.switches).c_str()));
  }
  std::string out;
  for (const auto& line : l) out += line + "\n";
  return out;
}

std::string comparison_json(const Comparison& c) {
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& r : c.rows) {
    nlohmann::json util;
    for (const auto& col : utilisation_columns())
      util[std::string(col.metric) + "_mean"] = opt(r.figures.util.*col.member);
    rows.push_back({{"source", r.source},
                    {"machine", r.machine},
                    {"device", r.device},
                    {"configuration", r.configuration},
                    {"switches", r.switches},
                    {"model", r.model},
                    {"image_size", r.image_size},
                    {"data", r.data},
                    {"batch", r.batch},
                    {"processes", r.processes},
                    {"cuda", r.cuda},
                    {"epochs_measured", r.figures.epochs},
                    {"first_epoch_dropped", r.figures.first_dropped},
                    {"images_per_s", r.figures.images_per_s},
                    {"speedup", r.speedup},
                    {"imagenet_epoch_s", r.epoch_s},
                    {"run_s", r.run_s},
                    {"data_wait_share", opt(r.figures.data_wait_share)},
                    {"allreduce_ms_per_step", opt(r.figures.communication_ms_per_step)},
                    {"cuda_graph", r.figures.cuda_graph},
                    {"utilisation", util},
                    {"reading", r.reading},
                    {"rate_spread", opt(r.spread)},
                    {"rate_spread_of", r.spread_of},
                    {"load_average", opt(r.load_average)},
                    {"others_cpu_cores", opt(r.others_cores)},
                    {"load_cores", r.load_cores},
                    {"price_per_gpu_hour", opt(r.price_per_gpu_hour)},
                    {"price_per_hour", opt(r.price_per_hour)},
                    {"cost_per_epoch", opt(r.cost_per_epoch)},
                    {"cost_per_run", opt(r.cost_per_run)},
                    {"break_even_speedup", opt(r.break_even)}});
  }
  nlohmann::json j{{"reference_row", c.reference + 1},
                   {"epochs", c.epochs},
                   {"imagenet_train_images", kImageNetTrainImages},
                   {"reading_across", c.across},
                   {"rows", rows}};
  j["warnings"] = c.warnings;
  // Paths and names come from the files and the file system, in any bytes: what is not UTF-8 shows as U+FFFD.
  return j.dump(1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

std::vector<std::string> write_comparison(const Comparison& c, const std::string& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec || !fs::is_directory(dir)) {
    throw ConfigError("--out " + dir + ": " + (ec ? ec.message() : std::string("not a folder")));
  }
  // The files are one set (compare.md links the pictures): all are written into a staging folder first, and only
  // when every one is there do they replace the folder's, so a failure leaves the earlier set whole.
  const std::string staging = dir + "/.compare-staging";
  fs::remove_all(staging, ec);
  fs::create_directory(staging, ec);
  if (ec) throw ConfigError("--out " + dir + ": cannot create " + staging + ": " + ec.message());
  std::vector<std::string> names;
  auto write = [&](const std::string& name, const std::string& text) {
    try {
      files::write_atomically(staging + "/" + name, text.data(), text.size());
    } catch (...) {
      std::error_code ignored;
      fs::remove_all(staging, ignored);
      throw;
    }
    names.push_back(name);
  };
  write("compare.md", comparison_markdown(c));
  write("compare.json", comparison_json(c));
  BarChart speed{"images/s per machine and configuration",
                 strprintf("median of the measured epochs; after each bar: the speed-up over row %zu and the "
                           "projected ImageNet epoch",
                           c.reference + 1),
                 " img/s",
                 {"images/s"},
                 {},
                 std::nullopt};
  BarChart util{"utilisation per machine and configuration (%)",
                "NVML's GPU utilisation (what nvidia-smi shows) against the share of SMs and tensor pipes at work",
                "%",
                {"GPU util (NVML)", "SM active", "tensor active", "DRAM bandwidth"},
                {},
                100.0};
  BarChart cost{strprintf("cost of %d ImageNet epochs", c.epochs),
                strprintf("at the prices given; after each bar: the break-even speed-up over row %zu against the "
                          "measured one",
                          c.reference + 1),
                "",
                {"cost"},
                {},
                std::nullopt};
  for (size_t i = 0; i < c.rows.size(); ++i) {
    const CompareRow& r = c.rows[i];
    const std::string label = strprintf("%zu. %s, %s, b%d", i + 1, r.machine.c_str(), r.configuration.c_str(), r.batch);
    speed.rows.push_back(
        {label,
         {r.figures.images_per_s},
         rate_text(r.figures.images_per_s) +
             strprintf(" img/s, %s, epoch %s", times_text(r.speedup).c_str(), hours_text(r.epoch_s).c_str())});
    const Utilisation& u = r.figures.util;
    util.rows.push_back({label, {u.gpu_util_pct, u.sm_util_pct, u.tensor_util_pct, u.dram_bw_util_pct}, ""});
    std::string note = r.price_per_hour ? money(*r.cost_per_run) : "no price";
    if (r.break_even && i != c.reference)
      note += ", break-even " + times_text(*r.break_even) + ", measured " + times_text(r.speedup);
    cost.rows.push_back({label, {r.cost_per_run}, note});
  }
  write("throughput.svg", render_bar_chart(speed));
  write("utilisation.svg", render_bar_chart(util));
  if (any_price(c)) write("cost.svg", render_bar_chart(cost));
  std::vector<std::string> written;
  for (const auto& name : names) {
    fs::rename(staging + "/" + name, dir + "/" + name, ec);
    if (ec) throw std::runtime_error("cannot move " + staging + "/" + name + " into " + dir + ": " + ec.message());
    written.push_back(dir + "/" + name);
  }
  fs::remove(staging, ec);
  if (!any_price(c)) fs::remove(dir + "/cost.svg", ec);  // an earlier set's, which this compare.md does not link
  return written;
}

}  // namespace rn50::report
