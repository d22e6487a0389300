// commands/report_command.cpp: `rn50 report RUN_DIR`: the run's page (report/run_report.h).
#include <cxxopts.hpp>

#include <cstdio>
#include <string>
#include <vector>

#include "commands/command.h"
#include "core/errors.h"
#include "core/utf8.h"
#include "report/run_report.h"

namespace rn50::commands {

int report_command(int argc, char** argv) {
  cxxopts::Options options("rn50 report",
                           "Write one self-contained HTML page of a training run: loss, accuracy, learning rate, "
                           "speed and utilisation per epoch and per step record, input wait, bad samples, the "
                           "configuration and the machine. Reads RUN_DIR/metrics.jsonl, config.yaml, run.json and "
                           "train.log; a torn or stray line is skipped and counted.");
  options.add_options()("out", "the page to write [default: RUN_DIR/report.html]", cxxopts::value<std::string>())(
      "run", "the run's out_dir", cxxopts::value<std::vector<std::string>>())("h,help", "print this help");
  options.parse_positional({"run"});
  options.positional_help("RUN_DIR");
  const auto parsed = parse_options(options, argc, argv);
  if (parsed.count("help")) {
    std::printf("%s\n", options.help().c_str());
    return 0;
  }
  if (!parsed.count("run") || parsed["run"].as<std::vector<std::string>>().size() != 1) {
    throw ConfigError("rn50 report needs one RUN_DIR (the out_dir of rn50 train)");
  }
  const std::string dir = parsed["run"].as<std::vector<std::string>>().front();
  if (parsed.count("out")) {
    const std::string out = parsed["out"].as<std::string>();
    check_output_file("--out", out);
    // A page written over another run's metrics.jsonl or config.yaml would destroy it.
    const auto ends_with = [&](const std::string& suffix) {
      return out.size() > suffix.size() && out.compare(out.size() - suffix.size(), suffix.size(), suffix) == 0;
    };
    if (!ends_with(".html") && !ends_with(".htm")) {
      throw ConfigError("--out " + utf8::printable(out) + ": name a .html file (the page replaces what is there)");
    }
  }
  const report::RunReport r =
      report::write_run_report(dir, parsed.count("out") ? parsed["out"].as<std::string>() : std::string());
  std::printf("wrote %s (%zu epochs, %zu step records%s)\n", r.path.c_str(), r.epochs, r.steps,
              r.skipped_lines ? (", " + std::to_string(r.skipped_lines) + " lines skipped").c_str() : "");
  return 0;
}

}  // namespace rn50::commands
