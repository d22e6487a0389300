// commands/infer.cpp: evaluation-mode forward pass of a weights file on a stored batch.
#include "commands/infer.h"

#include <ATen/ATen.h>
#include <ATen/Context.h>
#include <torch/utils.h>

#include "core/errors.h"
#include "core/log.h"
#include "core/safetensors.h"
#include "models/model.h"
#include "engine/checkpoint.h"

namespace rn50::commands {

void infer(const InferOptions& options) {
  namespace st = rn50::safetensors;
  st::File weights;
  st::File images;
  try {
    weights = st::read_file(options.weights);
    images = st::read_file(options.images);
  } catch (const st::FormatError& e) {
    throw ConfigError(e.what());
  }
  const st::TensorView* fc = weights.find("fc.weight");
  if (!fc || fc->shape.size() != 2) throw ConfigError(options.weights + " has no 2-D 'fc.weight' to size the classifier");
  const st::TensorView* x = images.find("images");
  if (!x || x->dtype != st::DType::F32 || x->shape.size() != 4 || x->shape[1] != 3) {
    throw ConfigError(options.images + " needs an F32 tensor 'images' of shape [N, 3, H, W]");
  }
  std::string model_name = options.model;
  if (model_name.empty()) {
    const auto it = weights.metadata.find("model");
    model_name = it != weights.metadata.end() ? it->second : "resnet50";
  }
  at::globalContext().setAllowTF32CuBLAS(false);
  at::globalContext().setAllowTF32CuDNN(false);
  const c10::Device device(options.device);
  auto model = models::create(model_name, {fc->shape[0], false});
  model->to(device);
  log_info(engine::load_weights(options.weights, *model, model->classifier_name()));
  model->eval();
  torch::NoGradGuard no_grad;
  const at::Tensor input =
      at::from_blob(const_cast<uint8_t*>(x->data), x->shape, at::kFloat).to(device, /*non_blocking=*/false, /*copy=*/true);
  const at::Tensor logits = model->forward(input).to(at::kCPU).contiguous();
  st::write_file_atomically(options.out, st::serialize({{"logits", st::DType::F32, logits.sizes().vec(),
                                                          static_cast<const uint8_t*>(logits.data_ptr()),
                                                          static_cast<size_t>(logits.nbytes())}},
                                                        {{"model", model_name}, {"weights", options.weights}}));
  log_info(strprintf("wrote logits [%lld, %lld] to %s", static_cast<long long>(logits.size(0)),
                     static_cast<long long>(logits.size(1)), options.out.c_str()));
}

}  // namespace rn50::commands
