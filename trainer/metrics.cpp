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
  // Where earlier stops came: kept, as the run's history, up to the step resumed from.
  if (r["type"] == "stop") return r.value("step", int64_t{-1}) >= 0 && r.value("step", int64_t{0}) <= resume.step;
  return false;
}

// Reads the file as it is, cuts a torn last line and, when resuming, the records past the resume point; rewrites it
// (atomically: core/files.h) when anything was cut. Returns what was repaired.
std::string repair(const std::string& path, const std::optional<ResumePoint>& resume) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return "";
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::string kept;
  size_t torn = 0, dropped = 0;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    if (lines.eof() && !text.empty() && text.back() != '\n') {
      torn = line.size();  // the last line has no newline: cut short by a full disk or a kill
      continue;
    }
    if (resume && !kept_on_resume(line, *resume)) {
      ++dropped;
      continue;
    }
    kept += line + '\n';
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

}  // namespace

MetricsLog::MetricsLog(const std::string& path, const std::optional<ResumePoint>& resume)
    : path_(path), repaired_(repair(path, resume)) {
  fd_ = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0) throw std::runtime_error("cannot open metrics file " + path + ": " + files::errno_text(errno));
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
  int64_t last_epoch = 0;
  while (std::getline(in, line)) {
    const nlohmann::json r = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (!r.is_object() || r.value("type", "") != "epoch" || !r.contains("epoch") || !r["epoch"].is_number_integer())
      continue;
    // An epoch number that does not go up starts another run appended to the file (a fresh run in a used out_dir,
    // as the report tells runs apart): the best so far is that run's, not an earlier one's.
    const int64_t epoch = r["epoch"].get<int64_t>();
    if (epoch <= last_epoch) best.reset();
    last_epoch = epoch;
    if (!r.contains("top1") || !r["top1"].is_number()) continue;
    const double top1 = r["top1"].get<double>();
    if (!best || top1 > best->top1) best = BestEpoch{epoch, top1};
  }
  return best;
}

}  // namespace rn50::trainer
