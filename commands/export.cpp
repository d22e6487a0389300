// commands/export.cpp: `rn50 export`: a checkpoint's weights as safetensors in torchvision's layout.
#include <cxxopts.hpp>

#include <cstdio>
#include <string>

#include "commands/command.h"
#include "core/errors.h"
#include "core/files.h"
#include "core/log.h"
#include "core/stop.h"
#include "trainer/checkpoint.h"

namespace rn50::commands {

int export_command(int argc, char** argv) {
  cxxopts::Options options("rn50 export", "Write a checkpoint's weights as safetensors in torchvision's layout.");
  options.add_options()("checkpoint", "rn50 checkpoint (checkpoint.safetensors)", cxxopts::value<std::string>())(
      "out", "output .safetensors file", cxxopts::value<std::string>())("h,help", "print this help");
  const auto parsed = parse_options(options, argc, argv);
  if (parsed.count("help")) {
    std::printf(
        "%s\nIn Python: model = torchvision.models.MODEL(num_classes=N);\n"
        "model.load_state_dict(safetensors.torch.load_file(OUT))\n"
        "MODEL is the checkpoint's model (rn50's names are torchvision's), N its class count; both are in OUT's "
        "metadata and in the line rn50 export logs.\n",
        options.help().c_str());
    return 0;
  }
  if (!parsed.count("checkpoint") || !parsed.count("out")) throw ConfigError("export needs --checkpoint and --out");
  init_logging("", 0);
  const std::string checkpoint = parsed["checkpoint"].as<std::string>(), out = parsed["out"].as<std::string>();
  check_output_file("--out", out, {checkpoint});
  stop::install_exit_handlers();  // a stop removes the half-written file
  if (files::same_file(out, checkpoint)) {
    throw ConfigError("--out " + out + " is the checkpoint itself; export writes another file (the run needs its own)");
  }
  const trainer::CheckpointMeta meta = trainer::export_weights(checkpoint, out);
  log_info("wrote " + out + ": torchvision.models." + meta.model +
           "(num_classes=" + std::to_string(meta.classes.size()) + ") loads it");
  return 0;
}

}  // namespace rn50::commands
