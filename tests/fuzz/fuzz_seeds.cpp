// tests/fuzz/fuzz_seeds.cpp: writes the fuzz targets' seed corpora: small JPEGs of each kind the decoder routes
// (grey, colour, progressive, odd sizes), safetensors files with metadata and a class list, the configurations, and
// recorded run folders as fuzz_report takes them (metrics.jsonl, train.log, config.yaml, run.json, "\x1e" between), and
// plan cache files.
//   fuzz_seeds CORPUS_DIR [CONFIGS_DIR [RUN_FOLDER...]]: CORPUS_DIR/{jpeg,safetensors,config,report,plan_cache}/...
#include <sys/stat.h>

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "codecs/jpeg_codec.h"
#include "core/safetensors.h"

namespace {

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

void write(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream(path, std::ios::binary)
      .write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

std::vector<uint8_t> gradient(int width, int height, int channels) {
  std::vector<uint8_t> pixels(static_cast<size_t>(width) * height * channels);
  for (size_t i = 0; i < pixels.size(); ++i) pixels[i] = static_cast<uint8_t>((i * 7 + i / 13) & 0xff);
  return pixels;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: fuzz_seeds CORPUS_DIR [CONFIGS_DIR]\n");
    return 2;
  }
  const std::string root = argv[1];
  for (const char* sub : {"", "/jpeg", "/safetensors", "/config", "/report", "/plan_cache"}) {
    mkdir((root + sub).c_str(), 0755);
  }
  struct Kind {
    int width, height, channels;
    bool progressive;
  };
  const Kind kinds[] = {{16, 16, 3, false}, {33, 17, 3, false}, {8, 40, 1, false}, {24, 24, 3, true}, {9, 9, 1, true}};
  int n = 0;
  for (const Kind& k : kinds) {
    const std::vector<uint8_t> pixels = gradient(k.width, k.height, k.channels);
    write(root + "/jpeg/seed" + std::to_string(n++) + ".jpg",
          rn50::codecs::encode_jpeg(pixels.data(), k.width, k.height, k.channels, 75, k.progressive));
  }
  namespace st = rn50::safetensors;
  const std::vector<uint8_t> weights(2 * 3 * 4), bias(2 * 2), steps(8);
  const std::vector<st::TensorView> tensors = {{"fc.weight", st::DType::F32, {2, 3}, weights.data(), weights.size()},
                                               {"fc.bias", st::DType::F16, {2}, bias.data(), bias.size()},
                                               {"step", st::DType::I64, {}, steps.data(), steps.size()}};
  write(root + "/safetensors/weights.safetensors", st::serialize(tensors, {}));
  write(root + "/safetensors/checkpoint.safetensors",
        st::serialize(tensors, {{"model", "resnet50"}, {"classes", st::encode_string_list({"a", "b"})}}));
  write(root + "/safetensors/empty.safetensors", st::serialize({}, {{"epoch", "3"}}));
  // The plan cache's file as rn50 writes it (tests/fuzz/fuzz_plan_cache.cpp's context), and a header alone.
  const std::string plans =
      "rn50 fusion-conv plan cache 1\ncontext rn50 fuzz; cuDNN 91900 loaded; CUDA driver 13000\n"
      "plan NVIDIA_H200-sm132-cc90/conv_stats/f16/x256x64x56x56/w64x64x3x3/s1p1/prologue 0 23 1=4,7=-1 0.412500\n"
      "plan NVIDIA_H200-sm132-cc90/wgrad/f16/x256x64x56x56/w64x64x3x3/s1p1 2 7 none 0.131000\n"
      "prologue NVIDIA_H200-sm132-cc90/wgrad/f16/x256x64x56x56/w64x64x3x3/s1p1/prologue separate\n";
  write(root + "/plan_cache/plans.txt", std::vector<uint8_t>(plans.begin(), plans.end()));
  const std::string header = "rn50 fusion-conv plan cache 1\ncontext rn50 fuzz; cuDNN 91900 loaded; CUDA driver 13000\n";
  write(root + "/plan_cache/empty.txt", std::vector<uint8_t>(header.begin(), header.end()));
  if (argc > 2) {
    for (const char* name : {"baseline", "optimized", "smoke"}) {
      const std::string text = read_text(std::string(argv[2]) + "/" + name + ".yaml");
      write(root + "/config/" + name + ".yaml", std::vector<uint8_t>(text.begin(), text.end()));
    }
  }
  for (int i = 3; i < argc; ++i) {
    const std::string folder = argv[i];
    std::string joined;
    for (const char* name : {"metrics.jsonl", "train.log", "config.yaml", "run.json"}) {
      if (name[0] != 'm') joined += "\n\x1e\n";
      joined += read_text(folder + "/" + name);  // "" for a file the folder lacks
    }
    const std::string base = folder.substr(folder.find_last_of('/') + 1);
    write(root + "/report/" + base, std::vector<uint8_t>(joined.begin(), joined.end()));
  }
  return 0;
}
