// report/records.cpp: reading metrics files, config.yaml, run.json and train.log's start table.
#include "report/records.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <sstream>

#include "core/errors.h"
#include "core/files.h"
#include "core/log.h"
#include "core/run_boundary.h"
#include "core/utf8.h"

namespace rn50::report {
namespace {

namespace fs = std::filesystem;

constexpr uint64_t kMaxSmallFileBytes = 16 << 20;  // config.yaml: far below this

// Whether anything stands at `path`: a file its reader opens, or something it names the reason it cannot (a FIFO, a
// folder, a link that loops or leads nowhere). A file that is not there is not an error for the optional files.
bool present(const std::string& path) {
  std::error_code ec;
  return fs::symlink_status(path, ec).type() != fs::file_type::not_found && !ec;
}

std::string trim(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t\r");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t\r") - b + 1);
}

// A YAML scalar as yaml-cpp writes one (to_yaml escapes what is not ASCII): "d\xe9" is "dé", 'it''s' is "it's";
// a plain one as it is. An escape it does not know stays as written.
std::string yaml_scalar(const std::string& text) {
  if (text.size() >= 2 && text.front() == '\'' && text.back() == '\'') {
    std::string out;
    for (size_t i = 1; i + 1 < text.size(); ++i) {
      out += text[i];
      if (text[i] == '\'' && text[i + 1] == '\'') ++i;
    }
    return out;
  }
  if (text.size() < 2 || text.front() != '"' || text.back() != '"') return text;
  std::string out;
  const size_t end = text.size() - 1;
  for (size_t i = 1; i < end; ++i) {
    if (text[i] != '\\' || i + 1 >= end) {
      out += text[i];
      continue;
    }
    const char e = text[++i];
    const size_t digits = e == 'x' ? 2 : e == 'u' ? 4 : e == 'U' ? 8 : 0;
    if (digits) {
      const std::string hex = text.substr(i + 1, digits);
      if (hex.size() == digits && hex.find_first_not_of("0123456789abcdefABCDEF") == std::string::npos) {
        const auto c = static_cast<uint32_t>(std::stoul(hex, nullptr, 16));
        if (c <= 0x10FFFF && (c < 0xD800 || c > 0xDFFF)) {
          utf8::append(out, c);
          i += digits;
          continue;
        }
      }
      out += '\\';
      out += e;
      continue;
    }
    static const std::string kEscapes = "\"\\/ 0abtnvfre";
    static const std::string kDecoded{'"', '\\', '/', ' ', '\0', '\a', '\b', '\t', '\n', '\v', '\f', '\r', '\x1b'};
    const size_t which = kEscapes.find(e);
    if (which != std::string::npos) {
      out += kDecoded[which];
    } else {
      out += '\\';
      out += e;
    }
  }
  return out;
}

// A line of config.yaml as rn50 writes it (core/config.cpp's to_yaml): "key: value", "" for empty, [a,b] for lists.
void add_config_line(const std::string& line, Rows& rows) {
  const size_t colon = line.find(':');
  if (line.empty() || line[0] == '#' || colon == std::string::npos) return;
  std::string value = trim(line.substr(colon + 1));
  if (value.size() >= 2 && (value.front() == '"' || value.front() == '\'')) value = yaml_scalar(value);
  if (value.size() >= 2 && value.front() == '[' && value.back() == ']') value = value.substr(1, value.size() - 2);
  rows.emplace_back(trim(line.substr(0, colon)), value);
}

// A value of run.json as text. A list or an object is no value rn50 writes there, and is not printed: printing
// recurses through it, and a file of nested lists would exhaust the stack.
std::string json_text(const nlohmann::json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_number_integer()) return std::to_string(v.get<int64_t>());
  if (v.is_number()) {
    std::ostringstream os;
    os.precision(4);
    os << v.get<double>();
    return os.str();
  }
  if (v.is_structured()) return v.is_array() ? "(a list)" : "(an object)";
  return v.dump();
}

// A count of cores or processes as run.json gives it: 0 (unknown) outside 0 to 2^20, never cut to an int.
int small_count(int64_t n) { return n >= 0 && n <= (int64_t{1} << 20) ? static_cast<int>(n) : 0; }

// run.json (trainer/run_info.h): the host's facts, then the start table's findings without their parentheses. Throws
// files::ReadError.
void read_run_json(const std::string& path, RunFolder& run) {
  std::vector<uint8_t> bytes;
  files::read_whole(path, kMaxLineBytes, bytes);  // a few KB as rn50 writes it
  const nlohmann::json info = nlohmann::json::parse(bytes.begin(), bytes.end(), nullptr, false);
  if (!info.is_object()) return;
  for (const char* key : {"started", "host", "cpu", "usable_cores", "host_cores", "host_memory_gib", "world_size"}) {
    if (info.contains(key)) run.machine.emplace_back(key, json_text(info[key]));
  }
  const nlohmann::json& load = info.contains("load_average") ? info["load_average"] : nlohmann::json();
  if (load.is_array() && load.size() == 3 && load[0].is_number() && load[1].is_number() && load[2].is_number()) {
    run.load_average = load[0].get<double>();
    auto count = [&](const char* key) {
      return info.contains(key) && info[key].is_number_integer() ? small_count(info[key].get<int64_t>()) : 0;
    };
    const int cores = count("host_cores") > 0 ? count("host_cores") : count("usable_cores");
    run.load_cores = cores;
    run.machine.emplace_back("load_average",
                             strprintf("%.2f %.2f %.2f (1, 5, 15 min) on %d cores, before the run trained",
                                       load[0].get<double>(), load[1].get<double>(), load[2].get<double>(), cores));
  }
  if (info.contains("world_size") && info["world_size"].is_number_integer()) {
    run.world_size = std::max(1, small_count(info["world_size"].get<int64_t>()));
  }
  if (info.contains("found") && info["found"].is_array()) {
    for (const auto& row : info["found"]) {
      if (!row.is_array() || row.size() != 2 || !row[0].is_string()) continue;
      const std::string name = row[0].get<std::string>();
      if (name.size() < 2) continue;  // rn50 writes each name in parentheses: a shorter one is not its
      run.machine.emplace_back(name.substr(1, name.size() - 2), json_text(row[1]));
    }
  }
  run.machine_from = "run.json";
}

// "2 processes over nccl; ..." -> 2.
int processes_in(const std::string& data_parallel_row) {
  const int n = std::atoi(data_parallel_row.c_str());
  return n > 0 ? n : 1;
}

}  // namespace

std::optional<double> Record::get(const std::string& key) const {
  const auto it = fields.find(key);
  return it == fields.end() ? std::nullopt : it->second;
}

std::optional<double> median(std::vector<double> values) {
  if (values.empty()) return std::nullopt;
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

MetricsFile read_metrics(const std::string& path) {
  MetricsFile file;
  file.path = path;
  RunBoundary runs;
  bool process_starts = true;  // the next epoch record is a process's first
  try {
    files::LineReader reader(path, kMaxMetricsBytes, kMaxLineBytes);
    for (std::string line; reader.next(line);) {
      ++file.lines;
      const nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
      const bool typed = j.is_object() && j.contains("type") && j["type"].is_string();
      const std::string type = typed ? j["type"].get<std::string>() : "";
      const bool numbered = typed && j.contains("epoch") && j["epoch"].is_number();
      if (!numbered || (type != "epoch" && type != "step" && type != "start" && type != "stop")) {
        ++file.skipped;
        continue;
      }
      Record record;
      for (const auto& [key, value] : j.items()) {
        if (value.is_number()) record.fields[key] = value.get<double>();
        if (value.is_null()) record.fields[key] = std::nullopt;
      }
      const bool fresh = type == "start" && j.contains("resumed") && j["resumed"] == false;
      if (runs.starts_run(type, record.get("epoch"), record.get("step"), fresh)) {
        file.epochs.clear();
        file.steps.clear();
        file.step_records = 0;
        file.step_stride = 1;
        file.stops = file.resumes = 0;
        file.last_stop.clear();
        process_starts = true;
      }
      if (type == "start") {
        process_starts = true;
        if (!fresh) ++file.resumes;
      } else if (type == "stop") {
        ++file.stops;
        const std::string signal =
            j.contains("signal") && j["signal"].is_string() ? j["signal"].get<std::string>() : "";
        file.last_stop =
            strprintf("%s in epoch %.0f after %.0f of its steps", signal.empty() ? "a signal" : signal.c_str(),
                      *record.get("epoch"), record.get("epoch_step").value_or(0));
      } else if (type == "epoch") {
        record.warm_up = process_starts || record.get("resumed_at_step").value_or(0) > 0;
        process_starts = false;
        file.epochs.push_back(std::move(record));
      } else {
        if (file.step_records++ % file.step_stride != 0) continue;
        file.steps.push_back(std::move(record));
        if (file.steps.size() > kMaxStepRecords) {
          for (size_t i = 1; 2 * i < file.steps.size(); ++i) file.steps[i] = std::move(file.steps[2 * i]);
          file.steps.resize((file.steps.size() + 1) / 2);
          file.step_stride *= 2;
        }
      }
    }
    file.runs = runs.runs();
    file.long_lines = reader.long_lines();
    file.lines += file.long_lines;
  } catch (const files::ReadError& e) {
    throw DataError(e.what());
  }
  return file;
}

void StartTableParser::add(const std::string& line) {
  // spdlog's "[time] [info] message"; rank-prefixed lines are other processes' warnings.
  const size_t at = line.find("] [info] ");
  if (at == std::string::npos) return;  // another rank's warning, the launcher's line: not the table's
  const std::string message = line.substr(at + 9);
  if (message == "rn50 train") {
    table_.clear();
    inside_ = true;
    return;
  }
  if (!inside_) return;
  if (message.size() < 3 || message.compare(0, 2, "  ") != 0 || message[2] == ' ') {
    inside_ = false;
    return;
  }
  const size_t gap = message.find("  ", 2);  // keys have no double space; the padding after them does
  const std::string key = message.substr(2, gap == std::string::npos ? std::string::npos : gap - 2);
  const std::string value = gap == std::string::npos ? "" : trim(message.substr(gap));
  table_.emplace_back(key, value);
}

Rows parse_start_table(const std::string& log_text) {
  StartTableParser parser;
  std::istringstream lines(log_text);
  for (std::string line; std::getline(lines, line);) parser.add(line);
  return parser.rows();
}

Rows read_start_table(const std::string& path, int64_t* long_lines) {
  StartTableParser parser;
  files::LineReader reader(path, kMaxMetricsBytes, kMaxLineBytes);
  for (std::string line; reader.next(line);) parser.add(line);
  if (long_lines) *long_lines = reader.long_lines();
  return parser.rows();
}

std::string run_name(const std::string& dir) {
  std::error_code ec;
  fs::path p = fs::absolute(dir, ec).lexically_normal();
  if (ec) p = fs::path(dir).lexically_normal();
  if (p.filename().empty()) p = p.parent_path();
  const std::string name = p.filename().string();
  return name.empty() ? p.string() : name;
}

std::string RunFolder::value(const std::string& config_key) const {
  for (const auto& [k, v] : config) {
    if (k == config_key) return v;
  }
  return "";
}

std::string RunFolder::found(const std::string& row) const {
  for (const auto& [k, v] : machine) {
    if (k == row) return v;
  }
  return "";
}

RunFolder read_run_folder(const std::string& dir) {
  RunFolder run;
  run.dir = dir;
  std::error_code ec;
  const fs::file_status status = fs::status(dir, ec);
  if (ec && ec != std::errc::no_such_file_or_directory) throw DataError("cannot read " + dir + ": " + ec.message());
  if (!fs::is_directory(status)) throw DataError(dir + (fs::exists(status) ? ": not a folder" : ": no such folder"));
  const std::string metrics = dir + "/metrics.jsonl";
  if (!present(metrics)) throw DataError(dir + ": no metrics.jsonl (not the out_dir of an rn50 train run)");
  run.metrics = read_metrics(metrics);
  // The other files are optional: one that is there but cannot be read is noted on the page, and the rest is read.
  auto optional = [&](const char* name, const auto& read) {
    const std::string path = dir + "/" + name;
    if (!present(path)) return;
    // rn50 writes no links there: one would show a file from elsewhere as the run's (config.yaml -> /etc/shadow).
    if (fs::is_symlink(fs::symlink_status(path, ec))) {
      run.unread.push_back(path + " is a symbolic link, not a file rn50 wrote");
      return;
    }
    try {
      read(path);
    } catch (const files::ReadError& e) {
      run.unread.push_back(e.what());
    }
  };
  Rows log_table;
  optional("train.log", [&](const std::string& path) { log_table = read_start_table(path, &run.log_long_lines); });
  optional("config.yaml", [&](const std::string& path) {
    files::LineReader reader(path, kMaxSmallFileBytes, kMaxLineBytes);
    Rows rows;
    for (std::string line; reader.next(line);) add_config_line(line, rows);
    run.config = std::move(rows);
    run.config_from = "config.yaml";
  });
  optional("run.json", [&](const std::string& path) { read_run_json(path, run); });
  const bool config_in_log = run.config.empty();
  const bool machine_in_log = run.machine.empty();
  for (const auto& [key, value] : log_table) {
    const bool found_row = key.size() > 2 && key.front() == '(';
    if (found_row && machine_in_log) run.machine.emplace_back(key.substr(1, key.size() - 2), value);
    if (!found_row && config_in_log) run.config.emplace_back(key, value);
  }
  if (config_in_log && !run.config.empty()) run.config_from = "train.log";
  if (machine_in_log && !run.machine.empty()) run.machine_from = "train.log";
  if (run.machine_from == "train.log" && !run.found("data parallel").empty()) {
    run.world_size = processes_in(run.found("data parallel"));
  }
  const std::string device = run.found("device");
  run.cuda = device.empty() ? run.value("device").rfind("cuda", 0) == 0 : device != "cpu";
  return run;
}

}  // namespace rn50::report
