// commands/launch.cpp: `rn50 launch --nproc N -- train ...`: N local ranks of one data-parallel run
// (parallel/launch.h).
#include <unistd.h>
#include <cxxopts.hpp>

#include <cstdio>
#include <stdexcept>
#include <string>

#include "commands/command.h"
#include "core/errors.h"
#include "parallel/launch.h"

namespace rn50::commands {

int launch_command(int argc, char** argv) {
  int split = argc;
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--") {
      split = i;
      break;
    }
  }
  cxxopts::Options options("rn50 launch",
                           "Start N local processes of one data-parallel run: rn50 launch --nproc N -- train ...");
  parallel::LaunchOptions launch;
  options.add_options()("nproc", "processes (one per GPU)", cxxopts::value<int>())(
      "master-port", "rendezvous port on 127.0.0.1 (default: a free one)", cxxopts::value<int>()->default_value("0"))(
      "grace", "seconds the others get to stop after one fails, before SIGKILL",
      cxxopts::value<int>()->default_value(std::to_string(launch.grace_s)))("h,help", "print this help");
  const auto parsed = parse_options(options, split, argv);
  if (parsed.count("help")) {
    std::printf("%s\n", options.help().c_str());
    return 0;
  }
  if (!parsed.count("nproc")) throw ConfigError("launch needs --nproc N");
  launch.processes = parsed["nproc"].as<int>();
  launch.master_port = parsed["master-port"].as<int>();
  launch.grace_s = parsed["grace"].as<int>();
  char self[4096];
  const ssize_t length = ::readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (length <= 0) throw std::runtime_error("launch: cannot find this program (/proc/self/exe)");
  launch.program.assign(self, static_cast<size_t>(length));
  for (int i = split + 1; i < argc; ++i) launch.args.emplace_back(argv[i]);
  return parallel::launch_local(launch);
}

}  // namespace rn50::commands
