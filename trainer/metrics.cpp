// trainer/metrics.cpp: JSON serialisation of step and epoch records, the resume repair, and the records' sinks.
#include "trainer/metrics.h"

#include <fcntl.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <cerrno>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <sstream>
#include <stdexcept>

#include "core/files.h"
#include "core/log.h"

namespace rn50::trainer {
namespace {

nlohmann::json optional_number(const std::optional<double>& x) { return x ? nlohmann::json(*x) : nlohmann::json(); }

// Whether a record of an interrupted run is still the resumed run's: step and stop records up to its step, epoch
// records up to its epoch. A line that is not a record is dropped.
bool kept_on_resume(const std::string& line, const ResumePoint& resume) {
  const nlohmann::json r = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (!r.is_object() || !r.contains("type")) return false;
  if (r["type"] == "step") return r.value("step", int64_t{-1}) >= 0 && r.value("step", int64_t{0}) <= resume.step;
  if (r["type"] == "epoch") return r.value("epoch", int64_t{-1}) >= 0 && r.value("epoch", int64_t{0}) <= resume.epoch;
  // Where earlier stops and resumes came: kept, as the run's history, up to the step resumed from.
  if (r["type"] == "stop" || r["type"] == "start") {
    return r.value("step", int64_t{-1}) >= 0 && r.value("step", int64_t{0}) <= resume.step;
  }
  return false;
}

// Whether a record is a fresh run's start record.
bool fresh_start(const nlohmann::json& r) {
  return r.is_object() && r.contains("type") && r["type"] == "start" && r.contains("resumed") &&
         r["resumed"].is_boolean() && !r["resumed"].get<bool>();
}
bool fresh_start(const std::string& line) {
  if (line.find("\"start\"") == std::string::npos) return false;  // most lines: no parse
  return fresh_start(nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false));
}

// Reads the file as it is, cuts a torn last line and, when resuming, the records past the resume point; rewrites it
// (atomically: core/files.h) when anything was cut. Returns what was repaired.
std::string repair(const std::string& path, const std::optional<ResumePoint>& resume) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return "";
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::string> lines;
  size_t torn = 0, dropped = 0;
  std::istringstream in_lines(text);
  for (std::string line; std::getline(in_lines, line);) {
    if (in_lines.eof() && !text.empty() && text.back() != '\n') {
      torn = line.size();  // the last line has no newline: cut short by a full disk or a kill
      continue;
    }
    lines.push_back(std::move(line));
  }
  // The resumed run began at its last fresh start record; the lines before it are earlier runs', kept as they are.
  size_t run_begins = 0;
  if (resume) {
    for (size_t i = lines.size(); i-- > 0;) {
      if (fresh_start(lines[i])) {
        run_begins = i;
        break;
      }
    }
  }
  std::string kept;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (resume && i >= run_begins && !kept_on_resume(lines[i], *resume)) {
      ++dropped;
      continue;
    }
    kept += lines[i] + '\n';
  }
  if (torn == 0 && dropped == 0) return "";
  try {
    files::write_atomically(path, kept.data(), kept.size());
  } catch (const std::runtime_error& e) {
    throw std::runtime_error("cannot repair metrics file " + path + ": " + e.what());
  }
  std::string what = "metrics file " + path + ":";
  if (torn) what += " cut a torn last line of " + std::to_string(torn) + " bytes;";
  if (dropped) what += " dropped " + std::to_string(dropped) + " records past the resumed checkpoint;";
  what.pop_back();
  return what;
}

std::optional<double> number_in(const nlohmann::json& record, const char* key) {
  if (!record.contains(key) || !record[key].is_number()) return std::nullopt;
  return record[key].get<double>();
}

}  // namespace

MetricsLog::MetricsLog(const std::string& path, const std::optional<ResumePoint>& resume)
    : path_(path), repaired_(repair(path, resume)) {
  fd_ = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0) throw std::runtime_error("cannot open metrics file " + path + ": " + files::errno_text(errno));
  const StartRecord start{resume.has_value(), resume ? resume->epoch : 0, resume ? resume->step : 0};
  try {
    write_line(
        nlohmann::json{{"type", "start"}, {"resumed", start.resumed}, {"epoch", start.epoch}, {"step", start.step}}
            .dump());
  } catch (...) {
    ::close(fd_);
    throw;
  }
}

MetricsLog::~MetricsLog() { ::close(fd_); }

void MetricsLog::write_line(const std::string& line) {
  const std::string record = line + '\n';
  ssize_t n = -1;
  do {
    n = ::write(fd_, record.data(), record.size());
  } while (n < 0 && errno == EINTR);
  if (n != static_cast<ssize_t>(record.size())) {
    throw std::runtime_error("cannot write metrics file " + path_ + ": " +
                             (n < 0 ? files::errno_text(errno) : "short write (disk full?)"));
  }
}

void MetricsLog::add_sink(std::unique_ptr<RecordSink> sink) { sinks_.push_back(std::move(sink)); }

template <typename Record>
void MetricsLog::to_sinks(const Record& record) {
  for (auto it = sinks_.begin(); it != sinks_.end();) {
    try {
      (*it)->write(record);
      ++it;
    } catch (const std::exception& e) {
      log_warn((*it)->name() + " not written from here on: " + e.what());
      it = sinks_.erase(it);
    }
  }
}

void MetricsLog::write(const StepRecord& r) {
  nlohmann::json j{{"type", "step"}, {"epoch", r.epoch}, {"step", r.step},
                   {"loss", r.loss}, {"lr", r.lr},       {"images_per_s", r.images_per_s}};
  for (const auto& [name, value] : r.extra) j[name] = optional_number(value);
  write_line(j.dump());
  to_sinks(r);
}

void MetricsLog::write(const EpochRecord& r) {
  nlohmann::json j{{"type", "epoch"},
                   {"epoch", r.epoch},
                   {"steps", r.steps},
                   {"images", r.images},
                   {"wall_s", r.wall_s},
                   {"images_per_s", r.images_per_s},
                   {"data_wait_s", r.data_wait_s},
                   {"compute_s", r.compute_s},
                   {"train_loss", r.train_loss},
                   {"val_loss", optional_number(r.val_loss)},
                   {"top1", optional_number(r.top1)},
                   {"top5", optional_number(r.top5)},
                   {"lr", r.lr},
                   {"peak_gpu_mem_gib", optional_number(r.peak_gpu_mem_gib)},
                   {"peak_host_rss_gib", r.peak_host_rss_gib},
                   {"bad_samples", r.bad_samples}};
  if (r.val_images) {
    j["val_images"] = *r.val_images;
    j["val_bad_samples"] = r.val_bad_samples;
  }
  if (r.resumed_at_step > 0) j["resumed_at_step"] = r.resumed_at_step;  // its figures cover the steps after it only
  for (const auto& [name, value] : r.extra) j[name] = optional_number(value);
  write_line(j.dump());
  to_sinks(r);
}

void MetricsLog::write(const StopRecord& r) {
  write_line(nlohmann::json{{"type", "stop"},
                            {"epoch", r.epoch},
                            {"step", r.step},
                            {"epoch_step", r.epoch_step},
                            {"signal", r.signal},
                            {"wall_s", r.wall_s},
                            {"train_loss", r.train_loss}}
                 .dump());
}

std::optional<BestEpoch> best_epoch_in(const std::string& path) {
  std::ifstream in(path);
  std::optional<BestEpoch> best;
  std::string line;
  RunBoundary runs;
  while (std::getline(in, line)) {
    const nlohmann::json r = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (!r.is_object() || !r.contains("type") || !r["type"].is_string()) continue;
    // Another run appended to the file (a fresh run in a used out_dir): the best so far is that run's.
    if (runs.starts_run(r["type"].get<std::string>(), number_in(r, "epoch"), number_in(r, "step"), fresh_start(r))) {
      best.reset();
    }
    if (r["type"] != "epoch" || !r.contains("epoch") || !r["epoch"].is_number_integer()) continue;
    const int64_t epoch = r["epoch"].get<int64_t>();
    if (!r.contains("top1") || !r["top1"].is_number()) continue;
    const double top1 = r["top1"].get<double>();
    if (!best || top1 > best->top1) best = BestEpoch{epoch, top1};
  }
  return best;
}

}  // namespace rn50::trainer
