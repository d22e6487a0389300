// trainer/summary_csv.cpp: the rows of summary.csv from epoch records, in memory and read back from metrics.jsonl.
#include "trainer/summary_csv.h"

#include <nlohmann/json.hpp>

#include <charconv>
#include <fstream>

#include "core/files.h"

namespace rn50::trainer {
namespace {

using Row = std::vector<std::optional<double>>;

std::optional<double> percent(const std::optional<double>& fraction) {
  return fraction ? std::optional<double>(100 * *fraction) : std::nullopt;
}

// In the order of SummaryCsv::columns().
Row row_of(const EpochRecord& r) {
  return {static_cast<double>(r.epoch),
          r.train_loss,
          r.val_loss,
          percent(r.top1),
          percent(r.top5),
          r.lr,
          r.images_per_s,
          r.wall_s,
          r.data_wait_s};
}

std::optional<double> number(const nlohmann::json& record, const char* key) {
  if (!record.contains(key) || !record[key].is_number()) return std::nullopt;
  return record[key].get<double>();
}

Row row_of(const nlohmann::json& r) {
  return {number(r, "epoch"),         number(r, "train_loss"),    number(r, "val_loss"),
          percent(number(r, "top1")), percent(number(r, "top5")), number(r, "lr"),
          number(r, "images_per_s"),  number(r, "wall_s"),        number(r, "data_wait_s")};
}

// The epoch records of the file's last run, told apart as the report tells them (RunBoundary).
std::vector<Row> last_run_rows(const std::string& metrics_path) {
  std::ifstream in(metrics_path);
  std::vector<Row> rows;
  RunBoundary runs;
  for (std::string line; std::getline(in, line);) {
    const nlohmann::json r = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (!r.is_object() || !r.contains("type") || !r["type"].is_string()) continue;
    const std::string type = r["type"].get<std::string>();
    const bool fresh = r.contains("resumed") && r["resumed"].is_boolean() && !r["resumed"].get<bool>();
    if (runs.starts_run(type, number(r, "epoch"), number(r, "step"), fresh)) rows.clear();
    if (type == "epoch" && number(r, "epoch")) rows.push_back(row_of(r));
  }
  return rows;
}

// The shortest text that reads back as the same double, as the metrics file's JSON writes numbers; empty for null.
std::string cell(const std::optional<double>& v) {
  if (!v) return "";
  char buffer[32];
  const auto result = std::to_chars(buffer, buffer + sizeof buffer, *v);
  return std::string(buffer, result.ptr);
}

}  // namespace

const std::vector<std::string>& SummaryCsv::columns() {
  static const std::vector<std::string> names = {"epoch", "train_loss",   "eval_loss", "eval_top1",  "eval_top5",
                                                 "lr",    "images_per_s", "wall_s",    "data_wait_s"};
  return names;
}

SummaryCsv::SummaryCsv(const std::string& path, const std::string& metrics_path, bool resumed) : path_(path) {
  if (resumed) rows_ = last_run_rows(metrics_path);
  rewrite();
}

void SummaryCsv::write(const EpochRecord& record) {
  rows_.push_back(row_of(record));
  rewrite();
}

void SummaryCsv::rewrite() const {
  std::string text;
  for (const auto& name : columns()) text += (text.empty() ? "" : ",") + name;
  text += '\n';
  for (const auto& row : rows_) {
    for (size_t i = 0; i < row.size(); ++i) text += (i ? "," : "") + cell(row[i]);
    text += '\n';
  }
  files::write_atomically(path_, text.data(), text.size());
}

}  // namespace rn50::trainer
