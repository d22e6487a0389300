// commands/main.cpp: the rn50 command: the table of subcommands and the one place errors become exit codes.
#include <cxxopts.hpp>

#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "commands/command.h"
#include "core/errors.h"

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
  };
  return table;
}

void usage() {
  std::printf(
      "rn50: ResNet training on ImageNet-format data, with each GPU speed-up as a switch.\n\nusage: rn50 COMMAND "
      "[options]\n\n");
  for (const auto& c : command_table()) std::printf("  %-12s %s\n", c.name, c.summary);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || std::string(argv[1]) == "-h" || std::string(argv[1]) == "--help") {
    usage();
    return argc < 2 ? 2 : 0;
  }
  const std::string name = argv[1];
  for (const auto& command : command_table()) {
    if (name != command.name) continue;
    try {
      return command.run(argc - 1, argv + 1);
    } catch (const rn50::ConfigError& e) {
      std::fprintf(stderr, "rn50 %s: configuration error: %s\n", name.c_str(), e.what());
    } catch (const rn50::DataError& e) {
      std::fprintf(stderr, "rn50 %s: data error: %s\n", name.c_str(), e.what());
    } catch (const rn50::DecodeError& e) {
      std::fprintf(stderr, "rn50 %s: bad image: %s\n", name.c_str(), e.what());
    } catch (const cxxopts::exceptions::exception& e) {
      std::fprintf(stderr, "rn50 %s: %s\n", name.c_str(), e.what());
    } catch (const std::exception& e) {
      std::fprintf(stderr, "rn50 %s: error: %s\n", name.c_str(), e.what());
      return 1;
    }
    return 2;
  }
  std::fprintf(stderr, "rn50: unknown command '%s'\n", name.c_str());
  usage();
  return 2;
}
