// commands/infer.cpp: `rn50 infer`: logits of a stored batch from a weights file (evaluation mode, true FP32), for
// checks against other frameworks.
#include <cxxopts.hpp>

#include <ATen/ATen.h>
#include <ATen/Context.h>
#include <torch/cuda.h>
#include <torch/utils.h>

#include <cstdio>
#include <memory>
#include <string>

#include "commands/command.h"
#include "core/errors.h"
#include "core/files.h"
#include "core/log.h"
#include "core/safetensors.h"
#include "core/stop.h"
#include "core/utf8.h"
#include "cuda/cuda_support.h"
#include "models/model.h"
#include "trainer/checkpoint.h"

namespace rn50::commands {
namespace {

struct InferOptions {
  std::string weights;  // torchvision-layout safetensors (rn50 export, or converted from torchvision)
  std::string model;    // registry name; empty: the weights' "model" metadata, else resnet50
  std::string images;   // safetensors file with an F32 tensor "images" [N, 3, H, W], already normalised
  std::string out;      // safetensors file to write, with an F32 tensor "logits" [N, classes]
  std::string device = "cpu";
};

// The class count train and export take (2^20); the classifier's tensor is in the file, which was read, so a model of
// that size costs what the file did (the one-class probe that names the classifier is small).
constexpr int64_t kMaxClasses = int64_t{1} << 20;
constexpr int64_t kMaxImages = 65536, kMaxSide = 4096;

std::string shape_of(const safetensors::TensorView& t) {
  std::string out = "[";
  for (size_t i = 0; i < t.shape.size(); ++i) out += (i ? ", " : "") + std::to_string(t.shape[i]);
  return out + "]";
}

// --device as a device this process has: cpu, cuda (the first GPU) or cuda:N.
c10::Device resolve_device(const std::string& name) {
  if (name == "cpu") return c10::Device(c10::kCPU);
  if (!is_cuda_device_name(name)) throw ConfigError("--device '" + name + "': expected cpu, cuda or cuda:N");
  if (!torch::cuda::is_available()) {
    throw ConfigError("--device " + name + ": no CUDA device is available" +
                      (cuda::built_with_cuda() ? "" : " (this rn50 was built without CUDA)"));
  }
  const int index = name == "cuda" ? 0 : std::stoi(name.substr(5));
  if (index >= static_cast<int>(torch::cuda::device_count())) {
    throw ConfigError("--device " + name + ": only " + std::to_string(torch::cuda::device_count()) +
                      " CUDA device(s) are visible");
  }
  return c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(index));
}

// Runs the model in evaluation mode in true FP32 (no TF32) and writes the logits.
void infer(const InferOptions& options) {
  namespace st = rn50::safetensors;
  const c10::Device device = resolve_device(options.device);
  for (const std::string& input : {options.weights, options.images}) {
    if (files::same_file(options.out, input)) {
      throw ConfigError("--out " + options.out + " is the input " + input + "; write the logits to another file");
    }
  }
  st::File weights;
  st::File images;
  try {
    weights = st::read_file(options.weights);
    images = st::read_file(options.images);
  } catch (const st::FormatError& e) {
    throw ConfigError(e.what());
  }
  const st::TensorView* x = images.find("images");
  if (!x || x->dtype != st::DType::F32 || x->shape.size() != 4 || x->shape[1] != 3) {
    throw ConfigError(options.images + " needs an F32 tensor 'images' of shape [N, 3, H, W]");
  }
  if (x->shape[0] < 1 || x->shape[0] > kMaxImages || x->shape[2] < 1 || x->shape[2] > kMaxSide || x->shape[3] < 1 ||
      x->shape[3] > kMaxSide) {
    throw ConfigError(options.images + ": 'images' is " + shape_of(*x) + "; rn50 infer takes 1 to " +
                      std::to_string(kMaxImages) + " images of 1 to " + std::to_string(kMaxSide) + " pixels a side");
  }
  std::string model_name = options.model;
  bool assumed = false;  // neither --model nor the file names the model
  if (model_name.empty()) {
    const auto it = weights.metadata.find("model");
    assumed = it == weights.metadata.end();
    model_name = assumed ? "resnet50" : it->second;
  }
  const std::string assumption =
      assumed ? " (" + options.weights + " names no model in its metadata, so resnet50 was assumed: give --model)" : "";
  // The model names its classifier (fc, classifier.2, heads.head, ...): a one-class build of it says which tensor
  // sizes the real one, and which image size it takes.
  std::shared_ptr<models::Classifier> probe;
  try {
    probe = models::create(model_name, {1, false});
  } catch (const ConfigError&) {  // its message names the configuration key, which rn50 infer has not
    std::string known;
    for (const auto& n : models::names()) known += (known.empty() ? "" : ", ") + n;
    throw ConfigError((options.model.empty() ? options.weights + "'s metadata" : std::string("--model")) +
                      " names the model '" + model_name.substr(0, 64) + "', which rn50 has not (" + known + ")");
  }
  const std::string classifier = probe->classifier_name() + ".weight";
  const int64_t fixed_size = probe->fixed_image_size();
  const st::TensorView* fc = weights.find(classifier);
  if (!fc || fc->shape.size() != 2) {
    throw ConfigError(options.weights + " has no 2-D '" + classifier + "' to size " + model_name + "'s classifier" +
                      assumption);
  }
  if (fc->dtype != st::DType::F32) {
    throw ConfigError(options.weights + ": '" + classifier + "' is " + st::dtype_name(fc->dtype) +
                      "; rn50 infer takes F32 weights, as rn50 export writes them");
  }
  if (fc->shape[0] < 1 || fc->shape[0] > kMaxClasses || fc->shape[1] < 1) {
    throw ConfigError(options.weights + ": '" + classifier + "' is " + shape_of(*fc) + ", not a classifier of 1 to " +
                      std::to_string(kMaxClasses) + " classes");
  }
  if (fixed_size > 0 && (x->shape[2] != fixed_size || x->shape[3] != fixed_size)) {
    throw ConfigError(options.images + ": 'images' is " + shape_of(*x) + "; " + model_name + " takes " +
                      std::to_string(fixed_size) + "x" + std::to_string(fixed_size) + " images only");
  }
  at::globalContext().setAllowTF32CuBLAS(false);
  at::globalContext().setAllowTF32CuDNN(false);
  const auto model = fc->shape[0] == 1 ? probe : models::create(model_name, {fc->shape[0], false});
  probe.reset();  // the real model's memory is what remains
  model->to(device);
  try {
    log_info(
        trainer::load_weights(weights, options.weights, *model, model->classifier_name(), /*new_classifier=*/false));
  } catch (const ConfigError& e) {
    throw ConfigError(e.what() + assumption);
  }
  weights = st::File();  // copied into the model
  model->eval();
  torch::NoGradGuard no_grad;
  const at::Tensor input = at::from_blob(const_cast<uint8_t*>(x->data), x->shape, at::kFloat)
                               .to(device, /*non_blocking=*/false, /*copy=*/true);
  at::Tensor logits;
  try {
    logits = model->forward(input).to(at::kCPU).contiguous();
  } catch (const c10::Error& e) {  // a shape the model cannot take: images smaller than its pooling leaves room for
    throw ConfigError(options.images + ": " + model_name + " cannot take 'images' of shape " + shape_of(*x) + ": " +
                      first_line(e.what_without_backtrace()));
  }
  files::write_atomically(
      options.out,
      st::serialize({{"logits", st::DType::F32, logits.sizes().vec(), static_cast<const uint8_t*>(logits.data_ptr()),
                      static_cast<size_t>(logits.nbytes())}},
                    // JSON text: a path that is not UTF-8 shows U+FFFD
                    {{"model", model_name}, {"weights", utf8::replace_invalid(options.weights)}}));
  log_info(strprintf("wrote logits [%lld, %lld] to %s", static_cast<long long>(logits.size(0)),
                     static_cast<long long>(logits.size(1)), options.out.c_str()));
}

}  // namespace

int infer_command(int argc, char** argv) {
  cxxopts::Options options("rn50 infer", "Logits of a stored batch from a weights file (evaluation mode, true FP32).");
  InferOptions request;
  std::string models;
  for (const auto& name : models::names()) models += (models.empty() ? "" : ", ") + name;
  options.add_options()("weights", "safetensors weights in torchvision's layout", cxxopts::value<std::string>())(
      "model", "model name, one of " + models + " (default: the weights' metadata, else resnet50)",
      cxxopts::value<std::string>())("images", "safetensors file with an F32 tensor 'images' [N,3,H,W]",
                                     cxxopts::value<std::string>())(
      "out", "safetensors file for the F32 tensor 'logits'", cxxopts::value<std::string>())(
      "device", "cpu or cuda:N", cxxopts::value<std::string>()->default_value("cpu"))("h,help", "print this help");
  const auto parsed = parse_options(options, argc, argv);
  if (parsed.count("help")) {
    std::printf("%s\n", options.help().c_str());
    return 0;
  }
  if (!parsed.count("weights") || !parsed.count("images") || !parsed.count("out")) {
    throw ConfigError("infer needs --weights, --images and --out");
  }
  request.weights = parsed["weights"].as<std::string>();
  request.images = parsed["images"].as<std::string>();
  request.out = parsed["out"].as<std::string>();
  check_output_file("--out", request.out, {request.weights, request.images});
  stop::install_exit_handlers();  // a stop removes the half-written file
  request.device = parsed["device"].as<std::string>();
  if (parsed.count("model")) request.model = parsed["model"].as<std::string>();
  init_logging("", 0);
  infer(request);
  return 0;
}

}  // namespace rn50::commands
