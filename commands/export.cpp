// commands/export.cpp: `rn50 export`: a checkpoint's weights as safetensors in torchvision's layout.
#include <cxxopts.hpp>

#include <cstdio>
#include <string>

#include "commands/command.h"
#include "core/errors.h"
#include "core/log.h"
#include "trainer/checkpoint.h"

namespace rn50::commands {

int export_command(int argc, char** argv) {
  cxxopts::Options options("rn50 export", "Write a checkpoint's weights as safetensors in torchvision's layout.");
  options.add_options()("checkpoint", "rn50 checkpoint (checkpoint.safetensors)", cxxopts::value<std::string>())(
      "out", "output .safetensors file", cxxopts::value<std::string>())("h,help", "print this help");
  const auto parsed = parse_options(options, argc, argv);
  if (parsed.count("help")) {
    std::printf(
        "%s\nIn Python: model = torchvision.models.resnet50(num_classes=N);\n"
        "model.load_state_dict(safetensors.torch.load_file(OUT))\n",
        options.help().c_str());
    return 0;
  }
  if (!parsed.count("checkpoint") || !parsed.count("out")) throw ConfigError("export needs --checkpoint and --out");
  init_logging("", 0);
  trainer::export_weights(parsed["checkpoint"].as<std::string>(), parsed["out"].as<std::string>());
  log_info("wrote " + parsed["out"].as<std::string>());
  return 0;
}

}  // namespace rn50::commands
