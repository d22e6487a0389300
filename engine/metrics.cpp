// engine/metrics.cpp: JSON serialisation of step and epoch records.
#include "engine/metrics.h"

#include <nlohmann/json.hpp>

#include <stdexcept>

namespace rn50::engine {
namespace {

nlohmann::json optional_number(const std::optional<double>& x) { return x ? nlohmann::json(*x) : nlohmann::json(); }

}  // namespace

MetricsLog::MetricsLog(const std::string& path) : out_(path, std::ios::app), path_(path) {
  if (!out_) throw std::runtime_error("cannot open metrics file " + path);
}

void MetricsLog::write_line(const std::string& line) {
  out_ << line << '\n';
  out_.flush();
  if (!out_) throw std::runtime_error("cannot write metrics file " + path_);
}

void MetricsLog::write(const StepRecord& r) {
  write_line(nlohmann::json{{"type", "step"},
                            {"epoch", r.epoch},
                            {"step", r.step},
                            {"loss", r.loss},
                            {"lr", r.lr},
                            {"images_per_s", r.images_per_s}}
                 .dump());
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
  for (const auto& [name, value] : r.extra) j[name] = optional_number(value);
  write_line(j.dump());
}

}  // namespace rn50::engine
