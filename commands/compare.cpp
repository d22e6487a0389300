// commands/compare.cpp: `rn50 compare FILE...`: machines side by side from their result files (report/compare.h).
#include <cxxopts.hpp>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "commands/command.h"
#include "core/errors.h"
#include "core/utf8.h"
#include "report/compare.h"

namespace rn50::commands {
namespace {

// "NAME=VALUE" at its last '=' (a machine name or a path may hold spaces, a value never holds '=').
std::pair<std::string, std::string> split_pair(const std::string& option, const std::string& text) {
  const size_t eq = text.rfind('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == text.size()) {
    throw ConfigError("--" + option + " '" + text + "': expected NAME=VALUE");
  }
  return {text.substr(0, eq), text.substr(eq + 1)};
}

// "a, b" -> {"a", "b"}: items trimmed, empty ones dropped; an item given twice is refused (it made a row twice).
std::vector<std::string> comma_list(const std::string& option, const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string item; std::getline(in, item, ',');) {
    const size_t begin = item.find_first_not_of(" \t");
    if (begin == std::string::npos) continue;
    item = item.substr(begin, item.find_last_not_of(" \t") - begin + 1);
    if (std::find(out.begin(), out.end(), item) != out.end()) {
      throw ConfigError("--" + option + " names '" + utf8::printable(item, 64) + "' twice");
    }
    out.push_back(item);
  }
  return out;
}

}  // namespace

int compare_command(int argc, char** argv) {
  cxxopts::Options options(
      "rn50 compare",
      "Put machines side by side from the files rn50 wrote on them: ablation.json files (bench/ablation.py) and run "
      "folders (the out_dir of rn50 train). Per machine and configuration: images/s, the projected ImageNet epoch and "
      "run, utilisation, input wait, all-reduce time, and with prices the cost and the break-even speed-up over a "
      "reference row. Rows must train the same model at the same image size on the same kind of data.");
  options.add_options()("out", "write compare.md, compare.json and the SVG pictures into this folder",
                        cxxopts::value<std::string>())(
      "name", "FILE=NAME: the machine name of one result file (repeatable) [default: from the file]",
      cxxopts::value<std::vector<std::string>>())(
      "price",
      "NAME=PRICE per GPU-hour (a CPU machine: per machine-hour), any currency; NAME is a machine's name or its "
      "first words, e.g. H200=3.5 (repeatable)",
      cxxopts::value<std::vector<std::string>>())("prices", "a file of 'NAME: PRICE' lines, as --price",
                                                  cxxopts::value<std::string>())(
      "reference", "the row the others are measured against: its number, or words of its machine or configuration",
      cxxopts::value<std::string>()->default_value("1"))("label", "ablation files: the configurations to take",
                                                         cxxopts::value<std::string>()->default_value("baseline,all"))(
      "data", "ablation files: synthetic or jpeg runs", cxxopts::value<std::string>()->default_value("synthetic"))(
      "batch", "ablation files: the batch sizes to take, e.g. 256 [default: all]", cxxopts::value<std::string>())(
      "epochs", "the run the projection and cost are for", cxxopts::value<int>()->default_value("90"))(
      "files", "result files", cxxopts::value<std::vector<std::string>>())("h,help", "print this help");
  options.parse_positional({"files"});
  options.positional_help("FILE...");
  const auto parsed = parse_options(options, argc, argv);
  if (parsed.count("help")) {
    std::printf("%s\n", options.help().c_str());
    return 0;
  }
  report::CompareOptions o;
  if (parsed.count("files")) o.inputs = parsed["files"].as<std::vector<std::string>>();
  if (parsed.count("name")) {
    for (const auto& item : parsed["name"].as<std::vector<std::string>>()) o.names.push_back(split_pair("name", item));
  }
  if (parsed.count("price")) {
    for (const auto& item : parsed["price"].as<std::vector<std::string>>()) {
      const auto [name, value] = split_pair("price", item);
      char* end = nullptr;
      const double price = std::strtod(value.c_str(), &end);
      if (*end != '\0' || !(price > 0) || !std::isfinite(price)) {
        throw ConfigError("--price " + item + ": '" + value + "' is not a positive price");
      }
      o.prices.emplace_back(name, price);
    }
  }
  if (parsed.count("prices")) o.prices_file = parsed["prices"].as<std::string>();
  o.reference = parsed["reference"].as<std::string>();
  o.labels = comma_list("label", parsed["label"].as<std::string>());
  o.data = parsed["data"].as<std::string>();
  if (parsed.count("batch")) {
    for (const auto& b : comma_list("batch", parsed["batch"].as<std::string>())) {
      char* end = nullptr;
      errno = 0;
      const long batch = std::strtol(b.c_str(), &end, 10);
      if (*end != '\0' || errno == ERANGE || batch < 1 || batch > (1 << 24)) {
        throw ConfigError("--batch '" + b + "' is not a batch size (1 to " + std::to_string(1 << 24) + ")");
      }
      o.batches.push_back(static_cast<int>(batch));
    }
  }
  o.epochs = parsed["epochs"].as<int>();
  const report::Comparison comparison = report::compare(o);
  // The files first: a bad --out fails before the table is printed as if all went well.
  std::vector<std::string> written;
  if (parsed.count("out")) written = report::write_comparison(comparison, parsed["out"].as<std::string>());
  std::printf("%s", report::comparison_markdown(comparison).c_str());
  for (const auto& path : written) std::printf("wrote %s\n", path.c_str());
  return 0;
}

}  // namespace rn50::commands
