// commands/main.cpp: the rn50 command: the table of subcommands and the one place errors become exit codes.
#include <cxxopts.hpp>

#include <cstdio>
#include <functional>
#include <new>
#include <string>
#include <vector>

#include "commands/command.h"
#include "core/build_info.h"
#include "core/crash_report.h"
#include "core/errors.h"
#include "core/log.h"
#include "core/stop.h"
#include "core/utf8.h"

namespace {

namespace commands = rn50::commands;

struct Command {
  const char* name;
  const char* summary;
  std::function<int(int, char**)> run;
};

const std::vector<Command>& command_table() {
  static const std::vector<Command> table = {
      {"train", "train a model (rn50 train --help)", commands::train_command},
      {"launch", "run N local processes of one data-parallel training (rn50 launch --help)", commands::launch_command},
      {"make-sample", "write a small learnable JPEG dataset (rn50 make-sample --help)", commands::make_sample_command},
      {"export", "write a checkpoint's weights for torchvision (rn50 export --help)", commands::export_command},
      {"infer", "logits of a stored batch from a weights file (rn50 infer --help)", commands::infer_command},
      {"doctor", "measure this instance and say why it would train slowly (rn50 doctor --help)",
       commands::doctor_command},
      {"bench-decode", "JPEG decode + augmentation rate of this CPU or GPU (rn50 bench-decode --help)",
       commands::bench_decode_command},
      {"report", "one HTML page of a training run (rn50 report --help)", commands::report_command},
      {"compare", "machines side by side from their result files, with cost (rn50 compare --help)",
       commands::compare_command},
  };
  return table;
}

void usage() {
  std::printf(
      "rn50: training ResNet-50 and the other registered models on ImageNet-format data, with each GPU speed-up as a "
      "switch.\n\nusage: rn50 COMMAND "
      "[options]\n       rn50 --version\n\n");
  for (const auto& c : command_table()) std::printf("  %-12s %s\n", c.name, c.summary);
}

}  // namespace

int main(int argc, char** argv) {
  rn50::print_stack_on_fatal_signals();
  if (argc >= 2 && (std::string(argv[1]) == "--version" || std::string(argv[1]) == "version")) {
    for (const auto& [name, value] : rn50::build_facts()) std::printf("%-10s %s\n", name.c_str(), value.c_str());
    return 0;
  }
  if (argc < 2 || std::string(argv[1]) == "-h" || std::string(argv[1]) == "--help") {
    usage();
    return argc < 2 ? 2 : 0;
  }
  const std::string name = argv[1];
  for (const auto& command : command_table()) {
    if (name != command.name) continue;
    // The one place an error becomes an exit code: 2 for what the user can fix (configuration, data, options), 1 for
    // the rest. The line also goes to the run's log file, where the run has one.
    // One line on the terminal: LibTorch's errors carry a stack trace after their first line, which goes to the
    // run's log file only; rn50's own are one line already, escaped (a path or value holding a newline once cut the
    // reason off).
    auto fatal = [&](const std::string& kind, const char* what, int code, bool own = true) {
      const std::string line = "rn50 " + name + ": " + kind + (own ? rn50::utf8::printable(what) : std::string(what));
      std::fprintf(stderr, "%s\n", rn50::first_line(line).c_str());
      rn50::log_to_file(line);
      return code;
    };
    try {
      return command.run(argc - 1, argv + 1);
    } catch (const rn50::ConfigError& e) {
      return fatal("configuration error: ", e.what(), 2);
    } catch (const rn50::DataError& e) {
      return fatal("data error: ", e.what(), 2);
    } catch (const rn50::DivergedError& e) {
      return fatal("training diverged: ", e.what(), 2);
    } catch (const rn50::DecodeError& e) {
      return fatal("bad image: ", e.what(), 2);
    } catch (const cxxopts::exceptions::exception& e) {
      return fatal("", e.what(), 2);
    } catch (const rn50::stop::StoppedBeforeTraining& e) {
      return fatal("", e.what(), 128 + e.signal);  // as a run stopped later exits: 130 for SIGINT, 143 for SIGTERM
    } catch (const std::bad_alloc&) {
      return fatal("error: ", "out of host memory (an input larger than this machine's memory?)", 1);
    } catch (const std::exception& e) {
      return fatal("error: ", e.what(), 1, /*own=*/false);
    }
  }
  std::fprintf(stderr, "rn50: unknown command '%s'\n", name.c_str());
  usage();
  return 2;
}
