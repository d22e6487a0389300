// report/run_report.cpp: the run's page: summary, charts, tables, and the figures it drew from as JSON.
#include "report/run_report.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <system_error>

#include "core/cost.h"
#include "core/errors.h"
#include "core/files.h"
#include "core/log.h"
#include "report/reading.h"
#include "report/records.h"
#include "report/summary.h"
#include "report/svg.h"

namespace rn50::report {
namespace {

using Points = std::vector<std::pair<double, std::optional<double>>>;

Points points(const std::vector<Record>& records, const std::string& x, const std::string& y, double scale = 1) {
  Points out;
  for (const auto& r : records) {
    const auto xv = r.get(x);
    if (!xv) continue;
    const auto yv = r.get(y);
    out.emplace_back(*xv, yv ? std::optional<double>(*yv * scale) : std::nullopt);
  }
  return out;
}

// y = a / b per record (seconds per step, shares of the wall time).
Points ratio_points(const std::vector<Record>& records, const std::string& a, const std::string& b, double scale) {
  Points out;
  for (const auto& r : records) {
    const auto x = r.get("epoch"), av = r.get(a), bv = r.get(b);
    if (!x) continue;
    out.emplace_back(*x, av && bv && *bv > 0 ? std::optional<double>(*av / *bv * scale) : std::nullopt);
  }
  return out;
}

bool any_value(const Points& p) {
  return std::any_of(p.begin(), p.end(), [](const auto& xy) { return xy.second.has_value(); });
}

std::string cell(const std::optional<double>& v, const char* format) {
  return v ? strprintf(format, *v) : std::string("-");
}

std::string table(const std::vector<std::string>& head, const std::vector<std::vector<std::string>>& rows,
                  const std::string& css_class = "") {
  std::string out = "<table" + (css_class.empty() ? "" : " class=\"" + css_class + "\"") + "><thead><tr>";
  for (const auto& h : head) out += "<th>" + escape_xml(h) + "</th>";
  out += "</tr></thead><tbody>\n";
  for (const auto& row : rows) {
    out += "<tr>";
    for (const auto& c : row) out += "<td>" + escape_xml(c) + "</td>";
    out += "</tr>\n";
  }
  return out + "</tbody></table>\n";
}

std::string figure(const std::string& svg) { return "<figure>" + svg + "</figure>\n"; }

nlohmann::json records_json(const std::vector<Record>& records) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& r : records) {
    nlohmann::json j = nlohmann::json::object();
    for (const auto& [k, v] : r.fields) j[k] = v ? nlohmann::json(*v) : nlohmann::json();
    out.push_back(j);
  }
  return out;
}

std::string minutes_or_hours(double seconds) {
  return seconds < 7200 ? strprintf("%.1f min", seconds / 60) : strprintf("%.1f h", seconds / 3600);
}

constexpr char kStyle[] =
    "body{font-family:sans-serif;max-width:1100px;margin:1.5em auto;padding:0 1em;color:#222}"
    "h1{font-size:1.5em}h2{font-size:1.2em;margin-top:1.6em;border-bottom:1px solid #ddd}"
    "table{border-collapse:collapse;font-size:12px;margin:.5em 0}td,th{border:1px solid #ccc;padding:2px 6px;"
    "text-align:right}td:first-child,th:first-child{text-align:left}table.kv td{text-align:left}"
    ".note{color:#555}.reading{background:#f4f8f4;border-left:4px solid #1b9e77;padding:.5em .8em}"
    ".charts{display:flex;flex-wrap:wrap;gap:0 12px}figure{margin:.4em 0}";

// The page's opening paragraph, the utilisation's reading and the note naming the epochs they summarise.
struct Overview {
  std::string summary, reading, measured_note;
};

// Which epochs the medians leave out, in words: the first, or each process's first and those resumed mid-way.
std::string left_out(const std::vector<Record>& epochs) {
  const auto warm = std::count_if(epochs.begin(), epochs.end(), [](const Record& e) { return e.warm_up; });
  if (warm == 1 && epochs.front().warm_up) return " (median of the epochs after the first)";
  const auto kept = static_cast<long long>(epochs.size() - warm);
  return strprintf(" (median of %lld epoch%s: %lld left out, each the first of its process or resumed mid-way)", kept,
                   kept == 1 ? "" : "s", static_cast<long long>(warm));
}

Overview overview(const RunFolder& run) {
  const std::vector<Record>& epochs = run.metrics.epochs;
  const Settings& config = run.config;
  const std::string& run_dir = run.dir;
  std::vector<std::string> facts;
  if (!setting(config, "model").empty()) facts.push_back(setting(config, "model"));
  const std::string data = setting(config, "data");
  if (!data.empty())
    facts.push_back(data == "synthetic" ? "synthetic data" : "JPEG files under " + setting(config, "data_root"));
  if (!setting(config, "batch_size").empty()) {
    facts.push_back("batch " + setting(config, "batch_size") +
                    (run.world_size > 1 ? " x " + std::to_string(run.world_size) + " processes" : ""));
  }
  const std::string device = run.found("device"), cpu = run.found("cpu"), cores = run.found("usable_cores");
  if (run.cuda) {
    facts.push_back("on " + (device.empty() ? std::string("a GPU") : device));
  } else {
    const std::string which =
        cpu + (cpu.empty() || cores.empty() ? "" : ", ") + (cores.empty() ? "" : cores + " cores");
    facts.push_back("on the CPU" + (which.empty() ? "" : " (" + which + ")"));
  }
  std::string summary;
  for (const auto& f : facts) summary += (summary.empty() ? "" : ", ") + f;
  summary += strprintf(". %zu epoch%s recorded", epochs.size(), epochs.size() == 1 ? "" : "s");
  if (!setting(config, "epochs").empty()) summary += " of " + setting(config, "epochs");
  const int64_t step_records = run.metrics.step_records;
  summary += strprintf(", %lld step record%s.", static_cast<long long>(step_records), step_records == 1 ? "" : "s");

  std::string reading, measured_note;
  bool first_dropped = false;
  const std::vector<Record> measured = measured_epochs(epochs, &first_dropped);
  if (!measured.empty()) {
    try {
      const EpochsSummary s = summarise(measured, run_dir);
      reading = read_utilisation(run.cuda, s.util, s.data_wait_share, switch_facts(config));
      summary += strprintf(s.images_per_s >= 100 ? " %.0f images/s" : " %.2f images/s", s.images_per_s) +
                 (first_dropped ? left_out(epochs) : "") + ": an ImageNet epoch" +
                 (setting(config, "image_size").empty() ? "" : " at " + setting(config, "image_size") + " px") +
                 " would take " + minutes_or_hours(imagenet_epoch_seconds(s.images_per_s)) + ".";
      measured_note = strprintf(
          "The reading and the figures above it are medians over epoch%s %s.", measured.size() == 1 ? "" : "s",
          measured.size() == 1 ? strprintf("%.0f", measured.front().get("epoch").value_or(0)).c_str()
                               : strprintf("%.0f-%.0f", measured.front().get("epoch").value_or(0),
                                           measured.back().get("epoch").value_or(0))
                                     .c_str());
    } catch (const std::exception& e) {
      reading = std::string("No reading: ") + e.what();
    }
  }
  std::optional<double> best_top1, best_epoch;
  for (const auto& e : epochs) {
    const auto t = e.get("top1");
    if (t && (!best_top1 || *t > *best_top1)) best_top1 = t, best_epoch = e.get("epoch");
  }
  if (best_top1) summary += strprintf(" Best top-1 %.2f%% (epoch %.0f).", 100 * *best_top1, best_epoch.value_or(0));

  return {summary, reading, measured_note};
}

// "3 lines over 1 MiB skipped": lines the reader skipped unread (kMaxLineBytes).
std::string long_lines(int64_t n) {
  return strprintf("%lld line%s over 1 MiB skipped", static_cast<long long>(n), n == 1 ? "" : "s");
}

// Where the page's inputs came from and what was skipped.
std::vector<std::string> notes_of(const RunFolder& run, const std::string& measured_note) {
  const MetricsFile& m = run.metrics;
  std::vector<std::string> notes;
  notes.push_back(
      strprintf("metrics.jsonl: %lld line%s read", static_cast<long long>(m.lines), m.lines == 1 ? "" : "s") +
      (m.skipped ? strprintf(", %lld skipped (torn, not JSON, or not a record of rn50 train)",
                             static_cast<long long>(m.skipped))
                 : std::string(m.long_lines ? "" : ", none skipped")) +
      (m.long_lines ? ", " + long_lines(m.long_lines) : std::string()) + ".");
  if (m.step_stride > 1) {
    notes.push_back(strprintf("%lld step records: one in %lld is drawn and in the data below (at most %zu are kept).",
                              static_cast<long long>(m.step_records), static_cast<long long>(m.step_stride),
                              kMaxStepRecords));
  }
  if (run.log_long_lines) notes.push_back("train.log: " + long_lines(run.log_long_lines) + ".");
  for (const std::string& why : run.unread) notes.push_back(why + " (left out).");
  if (m.runs > 1) {
    notes.push_back(
        strprintf("The file holds %d runs appended one after another (each fresh run in the same out_dir "
                  "appends to it): this page shows the last.",
                  m.runs));
  }
  if (m.stops || m.resumes) {
    notes.push_back(strprintf("The run was stopped %lld time%s by a signal (the last: %s) and resumed %lld time%s.",
                              static_cast<long long>(m.stops), m.stops == 1 ? "" : "s",
                              m.last_stop.empty() ? "none recorded" : m.last_stop.c_str(),
                              static_cast<long long>(m.resumes), m.resumes == 1 ? "" : "s"));
  }
  if (!measured_note.empty()) notes.push_back(measured_note);
  notes.push_back(run.config_from.empty() ? "Configuration: unrecorded (no config.yaml, no start table in train.log)."
                                          : "Configuration from " + run.config_from + ".");
  notes.push_back(run.machine_from.empty() ? "Machine: unrecorded (no run.json, no start table in train.log)."
                                           : "Machine from " + run.machine_from + ".");
  if (!run.cuda) notes.emplace_back("A CPU run: the GPU's figures do not apply and are unavailable.");

  return notes;
}

// The charts, in their sections: training, speed, utilisation, input and the step.
std::string charts_html(const RunFolder& run) {
  const std::vector<Record>& epochs = run.metrics.epochs;
  const std::vector<Record>& steps = run.metrics.steps;
  const std::string step_note = "no step records (log_every is longer than the run's epochs)";
  const std::string epoch_note = "no epoch records yet";
  LineChart loss{"training loss per step record",
                 "step",
                 "loss",
                 {{"mean loss since the last record", points(steps, "step", "loss")}}};
  LineChart epoch_loss{"loss per epoch",
                       "epoch",
                       "loss",
                       {{"train", points(epochs, "epoch", "train_loss"), true},
                        {"validation", points(epochs, "epoch", "val_loss"), true, true}}};
  LineChart accuracy{
      "validation accuracy per epoch",
      "epoch",
      "%",
      {{"top-1", points(epochs, "epoch", "top1", 100), true}, {"top-5", points(epochs, "epoch", "top5", 100), true}},
      0.0,
      100.0};
  LineChart lr{"learning rate", "step", "rate (log scale)", {{"per step record", points(steps, "step", "lr")}}};
  lr.log_y = true;
  LineChart lr_epochs{"learning rate at each epoch's last step",
                      "epoch",
                      "rate (log scale)",
                      {{"per epoch", points(epochs, "epoch", "lr"), true}}};
  lr_epochs.log_y = true;
  LineChart speed{"images/s per step record",
                  "step",
                  "images/s",
                  {{"since the last record", points(steps, "step", "images_per_s")}}};
  LineChart speed_epochs{
      "images/s per epoch", "epoch", "images/s", {{"whole epoch", points(epochs, "epoch", "images_per_s"), true}}};
  LineChart util_epochs{"utilisation per epoch (epoch means)", "epoch", "%", {}, 0.0, 100.0};
  LineChart util_steps{"utilisation per step record (means since the last record)", "step", "%", {}, 0.0, 100.0};
  for (const char* metric : {"gpu_util_pct", "sm_util_pct", "tensor_util_pct", "dram_bw_util_pct"}) {
    std::string heading;
    for (const auto& col : utilisation_columns()) {
      if (std::string(col.metric) == metric) heading = col.heading;
    }
    util_epochs.series.push_back({heading, points(epochs, "epoch", std::string(metric) + "_mean"), true});
    util_steps.series.push_back({heading, points(steps, "step", metric)});
  }
  LineChart power{"power and SM clock per epoch",
                  "epoch",
                  "W or MHz",
                  {{"power (W)", points(epochs, "epoch", "power_w_mean"), true},
                   {"SM clock (MHz)", points(epochs, "epoch", "sm_clock_mhz_mean"), true}}};
  LineChart wait{"input wait per epoch",
                 "epoch",
                 "% of the epoch's wall time",
                 {{"data wait", ratio_points(epochs, "data_wait_s", "wall_s", 100), true}},
                 0.0};
  LineChart bad{"bad samples per epoch",
                "epoch",
                "samples",
                {{"bad samples", points(epochs, "epoch", "bad_samples"), true}},
                0.0};
  LineChart split{
      "where a step's time went (ms per step; device parts can overlap the wait)", "epoch", "ms per step", {}, 0.0};
  for (const auto& [key, label] :
       std::vector<std::pair<std::string, std::string>>{{"data_wait_s", "data wait"},
                                                        {"input_s", "copy"},
                                                        {"forward_backward_s", "forward+backward"},
                                                        {"optimizer_s", "optimizer"},
                                                        {"communication_s", "all-reduce"},
                                                        {"between_steps_s", "between"},
                                                        {"wall_s", "wall"}}) {
    Series s{label, ratio_points(epochs, key, "steps", 1e3), true, key == "wall_s"};
    if (any_value(s.points)) split.series.push_back(std::move(s));
  }
  for (LineChart* c : {&epoch_loss, &accuracy, &lr_epochs, &speed_epochs, &util_epochs, &power, &wait, &bad, &split}) {
    c->integer_x = true;
  }
  const std::string gpu_note = run.cuda ? "unavailable: no NVML readings recorded" : "unavailable on a CPU run";
  const bool steps_have_util =
      std::any_of(steps.begin(), steps.end(), [](const Record& r) { return r.has("gpu_util_pct"); });
  const std::string step_util_note = steps.empty() ? step_note
                                     : steps_have_util
                                         ? gpu_note
                                         : "the step records carry no utilisation (written by an older rn50)";

  std::string h = "<h2>Training</h2>\n<div class=\"charts\">\n";
  h += figure(render_line_chart(loss, step_note)) + figure(render_line_chart(epoch_loss, epoch_note));
  h += figure(render_line_chart(accuracy, "no validation recorded (validate: off, or no val/ split)"));
  h += figure(render_line_chart(lr, step_note)) + figure(render_line_chart(lr_epochs, epoch_note));
  h += "</div>\n<h2>Speed</h2>\n<div class=\"charts\">\n" + figure(render_line_chart(speed, step_note)) +
       figure(render_line_chart(speed_epochs, epoch_note)) + "</div>\n";
  h += "<h2>Utilisation</h2>\n";
  h += "<p class=\"note\">NVML's GPU utilisation (what nvidia-smi shows) is the share of time in which any kernel "
       "ran; SM activity, tensor-pipe activity and DRAM bandwidth (GPM, Hopper and newer) say how much of the GPU "
       "did work.</p>\n<div class=\"charts\">\n";
  h += figure(render_line_chart(util_epochs, gpu_note)) + figure(render_line_chart(util_steps, step_util_note));
  h += figure(render_line_chart(power, gpu_note)) + "</div>\n";
  h += "<h2>Input and the step</h2>\n<div class=\"charts\">\n" + figure(render_line_chart(wait, epoch_note)) +
       figure(render_line_chart(bad, epoch_note)) + figure(render_line_chart(split, epoch_note)) + "</div>\n";
  return h;
}

// One row per epoch record.
std::string epochs_html(const std::vector<Record>& epochs) {
  std::vector<std::vector<std::string>> epoch_rows;
  for (const auto& e : epochs) {
    const auto wall = e.get("wall_s"), wait_s = e.get("data_wait_s");
    // An epoch resumed mid-way: its figures cover the steps after the resume.
    const auto resumed_at = e.get("resumed_at_step");
    const std::string epoch = cell(e.get("epoch"), "%.0f") +
                              (resumed_at && *resumed_at > 0 ? strprintf(" (from step %.0f)", *resumed_at) : "");
    epoch_rows.push_back(
        {epoch, cell(wall, "%.2f"), cell(e.get("images_per_s"), "%.1f"), cell(e.get("train_loss"), "%.4f"),
         cell(e.get("val_loss"), "%.4f"), e.get("top1") ? strprintf("%.2f%%", 100 * *e.get("top1")) : "-",
         e.get("top5") ? strprintf("%.2f%%", 100 * *e.get("top5")) : "-", cell(e.get("lr"), "%.6g"),
         cell(wait_s, "%.3f"), wall && wait_s && *wall > 0 ? strprintf("%.1f%%", 100 * *wait_s / *wall) : "-",
         cell(e.get("bad_samples"), "%.0f"), cell(e.get("gpu_util_pct_mean"), "%.1f"),
         cell(e.get("sm_util_pct_mean"), "%.1f"), cell(e.get("tensor_util_pct_mean"), "%.1f"),
         cell(e.get("dram_bw_util_pct_mean"), "%.1f"), cell(e.get("power_w_mean"), "%.0f"),
         cell(e.get("sm_clock_mhz_mean"), "%.0f"), cell(e.get("peak_gpu_reserved_gib"), "%.2f"),
         cell(e.get("peak_host_rss_gib"), "%.2f")});
  }

  return "<h2>Epochs</h2>\n" + table({"epoch", "wall s", "images/s", "train loss", "val loss", "top-1", "top-5", "lr",
                                      "data wait s", "data wait", "bad samples", "GPU util %", "SM active %",
                                      "tensor %", "DRAM bw %", "power W", "SM MHz", "GPU reserved GiB", "host RSS GiB"},
                                     epoch_rows, "epochs");
}

// The resolved configuration and the machine, as the run recorded them.
std::string settings_html(const RunFolder& run) {
  std::vector<std::vector<std::string>> config_rows, machine_rows;
  for (const auto& [k, v] : run.config) config_rows.push_back({k, v});
  for (const auto& [k, v] : run.machine) machine_rows.push_back({k, v});
  return "<h2>Configuration</h2>\n<p class=\"note\">" +
         escape_xml(run.config_from.empty() ? "unrecorded" : "resolved, from " + run.config_from) + "</p>\n" +
         table({"key", "value"}, config_rows, "kv") + "<h2>Machine</h2>\n<p class=\"note\">" +
         escape_xml(run.machine_from.empty() ? "unrecorded" : "from " + run.machine_from) + "</p>\n" +
         table({"what", "value"}, machine_rows, "kv");
}

// The figures the page drew, as the metrics file gave them (data, not a script: nothing runs).
std::string data_html(const MetricsFile& m) {
  std::string data_json = nlohmann::json{
      {"epochs", records_json(m.epochs)},
      {"steps", records_json(m.steps)},
      {"lines", m.lines},
      {"skipped", m.skipped},
      {"runs", m.runs}}.dump();
  // Every '<' as \u003c (it stands only inside strings): "</script>" or "<!--" in a key or value must not end or
  // change the script element.
  for (size_t at = data_json.find('<'); at != std::string::npos; at = data_json.find('<', at + 6)) {
    data_json.replace(at, 1, "\\u003c");
  }
  return "<script type=\"application/json\" id=\"rn50-data\">" + data_json + "</script>\n";
}

std::string render(const RunFolder& run) {
  const std::string name = run_name(run.dir);
  const Overview o = overview(run);
  std::string h =
      "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>rn50 run: " + escape_xml(name) +
      "</title>\n<style>" + kStyle + "</style>\n</head>\n<body>\n";
  h += "<h1>rn50 run: " + escape_xml(name) + "</h1>\n";
  h += "<p id=\"summary\">" + escape_xml(o.summary) + "</p>\n";
  if (!o.reading.empty())
    h += "<p class=\"reading\" id=\"reading\"><b>What the utilisation says:</b> " + escape_xml(o.reading) + "</p>\n";
  h += "<ul class=\"note\">\n";
  for (const auto& n : notes_of(run, o.measured_note)) h += "<li>" + escape_xml(n) + "</li>\n";
  h += "</ul>\n";
  h += charts_html(run) + epochs_html(run.metrics.epochs) + settings_html(run) + data_html(run.metrics);
  h += "<p class=\"note\">Written by rn50 report from " + escape_xml(run.dir) + ".</p>\n</body>\n</html>\n";
  return h;
}

}  // namespace

std::string render_run_report(const std::string& run_dir) { return render(read_run_folder(run_dir)); }

RunReport write_run_report(const std::string& run_dir, const std::string& out_path) {
  const RunFolder run = read_run_folder(run_dir);
  const std::string html = render(run);
  RunReport r;
  r.path = out_path.empty() ? run_dir + "/" + kRunReportFile : out_path;
  // The page must not replace what the run wrote (its metrics, log, checkpoint): only a page may be overwritten.
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(run_dir, ec)) {
    if (entry.path().filename() != kRunReportFile && files::same_file(r.path, entry.path().string())) {
      throw ConfigError("--out " + r.path + " is the run's " + entry.path().filename().string() +
                        "; write the page to another file");
    }
  }
  files::write_atomically(r.path, html.data(), html.size());
  r.epochs = run.metrics.epochs.size();
  r.steps = static_cast<size_t>(run.metrics.step_records);
  r.skipped_lines = run.metrics.skipped;
  return r;
}

}  // namespace rn50::report
