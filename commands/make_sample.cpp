// commands/make_sample.cpp: `rn50 make-sample`: a small ImageNet-format JPEG dataset whose classes can be learned.
#include <cxxopts.hpp>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "commands/command.h"
#include "core/errors.h"
#include "core/files.h"
#include "core/log.h"
#include "samples/damaged_images.h"
#include "samples/sample_maker.h"

namespace rn50::commands {

int make_sample_command(int argc, char** argv) {
  cxxopts::Options options("rn50 make-sample", "Write a small ImageNet-format JPEG dataset with learnable classes.");
  samples::SampleSpec spec;
  options.add_options()("out", "output folder", cxxopts::value<std::string>())(
      "classes", "number of classes", cxxopts::value<int>()->default_value(std::to_string(spec.classes)))(
      "per-class", "training images per class", cxxopts::value<int>()->default_value(std::to_string(spec.per_class)))(
      "val-per-class", "validation images per class",
      cxxopts::value<int>()->default_value(std::to_string(spec.val_per_class)))(
      "size", "image height in pixels (width is 4/3 of it)",
      cxxopts::value<int>()->default_value(std::to_string(spec.size)))(
      "noise",
      "fine noise in grey levels (0: 2 to 8 per image, files of about 35 KiB at --size 375; 20: about 95 KiB, "
      "ImageNet's size)",
      cxxopts::value<double>()->default_value("0"))(
      "seed", "random seed", cxxopts::value<uint64_t>()->default_value(std::to_string(spec.seed)))(
      "threads", "threads that render and encode (default: the cores this process may use)",
      cxxopts::value<int>()->default_value("0"))(
      "damaged",
      "also write damaged and hostile files into every training class folder (samples/damaged_images.h: 11 bad, 3 "
      "odd but good, and a FIFO, two broken links and a sparse 2 GiB file), to see a run count and skip them")(
      "h,help", "print this help");
  const auto parsed = parse_options(options, argc, argv);
  if (parsed.count("help")) {
    std::printf("%s\n", options.help().c_str());
    return 0;
  }
  if (!parsed.count("out")) throw ConfigError("make-sample needs --out DIR");
  spec.threads = parsed["threads"].as<int>();
  if (spec.threads < 0) throw ConfigError("make-sample: --threads must be 0 (all usable cores) or more");
  spec.out_dir = parsed["out"].as<std::string>();
  spec.classes = parsed["classes"].as<int>();
  spec.per_class = parsed["per-class"].as<int>();
  spec.val_per_class = parsed["val-per-class"].as<int>();
  spec.size = parsed["size"].as<int>();
  spec.noise = parsed["noise"].as<double>();
  spec.seed = parsed["seed"].as<uint64_t>();
  init_logging("", 0);
  const int64_t files = samples::make_sample_dataset(spec);
  log_info(strprintf("wrote %lld images of %d classes to %s", static_cast<long long>(files), spec.classes,
                     spec.out_dir.c_str()));
  if (parsed.count("damaged")) {
    samples::DamagedCounts all;
    for (const auto& entry : std::filesystem::directory_iterator(spec.out_dir + "/train")) {
      if (!entry.is_directory()) continue;
      const std::string dir = entry.path().string();
      std::string good_path;  // one image make-sample wrote
      for (const auto& f : std::filesystem::directory_iterator(dir)) {
        if (f.path().filename().string().rfind("damaged_", 0) != 0) good_path = f.path().string();
      }
      if (good_path.empty()) continue;
      std::vector<uint8_t> good;
      files::read_whole(good_path, uint64_t{64} << 20, good);
      const samples::DamagedCounts c = samples::write_damaged_images(dir, good, /*special=*/true);
      all.files += c.files;
      all.bad += c.bad;
    }
    log_info(strprintf("wrote %d damaged or odd files into the training classes: %d are bad samples, %d decode",
                       all.files, all.bad, all.files - all.bad));
  }
  return 0;
}

}  // namespace rn50::commands
