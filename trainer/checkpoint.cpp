// trainer/checkpoint.cpp: checkpoints as safetensors files (weights under torchvision's names, the optimizer's state
// under its own prefix, progress, classes and the optimizer's name in the metadata), written atomically.
#include "trainer/checkpoint.h"

#include <ATen/ATen.h>
#include <torch/nn/module.h>
#include <torch/utils.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <limits>
#include <memory>
#include <unordered_set>

#include "core/errors.h"
#include "core/files.h"
#include "core/log.h"
#include "core/safetensors.h"
#include "models/model.h"
#include "trainer/optimizer.h"

namespace rn50::trainer {
namespace {

namespace st = rn50::safetensors;

constexpr const char* kFormat = "rn50-checkpoint-2";
constexpr const char* kExtraPrefix = "state.";

st::DType to_dtype(at::ScalarType type) {
  switch (type) {
    case at::kDouble:
      return st::DType::F64;
    case at::kFloat:
      return st::DType::F32;
    case at::kHalf:
      return st::DType::F16;
    case at::kBFloat16:
      return st::DType::BF16;
    case at::kLong:
      return st::DType::I64;
    case at::kInt:
      return st::DType::I32;
    case at::kByte:
      return st::DType::U8;
    default:
      throw std::invalid_argument(std::string("checkpoint: unsupported dtype ") + c10::toString(type));
  }
}

at::ScalarType to_scalar_type(st::DType dtype) {
  switch (dtype) {
    case st::DType::F64:
      return at::kDouble;
    case st::DType::F32:
      return at::kFloat;
    case st::DType::F16:
      return at::kHalf;
    case st::DType::BF16:
      return at::kBFloat16;
    case st::DType::I64:
      return at::kLong;
    case st::DType::I32:
      return at::kInt;
    case st::DType::I16:
      return at::kShort;
    case st::DType::I8:
      return at::kChar;
    case st::DType::U8:
      return at::kByte;
    case st::DType::BOOL:
      return at::kBool;
  }
  return at::kFloat;
}

// A metadata value for an error message, cut short.
std::string shown(const std::string& value) { return value.size() > 40 ? value.substr(0, 40) + "..." : value; }

// Every value is range-checked: a resumed run trusts them for its schedule (a negative step gave a negative rate).
CheckpointMeta meta_of(const st::File& file, const std::string& path) {
  auto get = [&](const std::string& key) {
    const auto it = file.metadata.find(key);
    if (it == file.metadata.end()) throw ConfigError("checkpoint " + path + " has no '" + key + "' in its metadata");
    return it->second;
  };
  auto integer = [&](const std::string& key, int64_t low, int64_t high) {
    const std::string text = get(key);
    errno = 0;
    char* end = nullptr;
    const long long v = std::strtoll(text.c_str(), &end, 10);
    if (text.empty() || *end != '\0' || errno == ERANGE || v < low || v > high) {
      throw ConfigError("checkpoint " + path + ": metadata '" + key + "' is '" + shown(text) +
                        "', not an integer in [" + std::to_string(low) + ", " + std::to_string(high) + "]");
    }
    return static_cast<int64_t>(v);
  };
  if (get("format") != kFormat) {
    throw ConfigError("not an rn50 checkpoint (format " + shown(get("format")) + "): " + path);
  }
  constexpr int64_t kMany = int64_t{1} << 40;
  CheckpointMeta meta;
  meta.model = get("model");
  // Checkpoints from before AdamW name no optimizer: they hold SGD's momentum.
  const auto optimizer = file.metadata.find("optimizer");
  meta.optimizer = optimizer == file.metadata.end() ? "sgd" : optimizer->second;
  if (meta.optimizer != "sgd" && meta.optimizer != "adamw") {
    throw ConfigError("checkpoint " + path + ": metadata 'optimizer' is '" + shown(meta.optimizer) +
                      "', not sgd or adamw");
  }
  if (meta.model.empty() || meta.model.size() > 64) {
    throw ConfigError("checkpoint " + path + ": metadata 'model' is '" + shown(meta.model) + "', not a model name");
  }
  meta.epoch = integer("epoch", 0, 1000000);
  meta.batch_size = integer("batch_size", 1, 1 << 24);
  meta.steps_per_epoch = integer("steps_per_epoch", 1, kMany);
  meta.step = integer("step", 0, kMany);
  meta.seed = integer("seed", std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max());
  // Written before stops mid-epoch existed, a checkpoint names no epoch_step: it was written at an epoch's end.
  meta.epoch_step = file.metadata.count("epoch_step") ? integer("epoch_step", 0, meta.steps_per_epoch - 1) : int64_t{0};
  const int64_t expected = meta.epoch * meta.steps_per_epoch + meta.epoch_step;
  if (meta.step != expected) {
    // A step the epochs do not account for: resumed, such a run would train nothing or repeat steps.
    throw ConfigError("checkpoint " + path + ": metadata step " + std::to_string(meta.step) + " is " +
                      (meta.step > expected ? "past" : "short of") + " its " + std::to_string(meta.epoch) +
                      " epochs of " + std::to_string(meta.steps_per_epoch) + " steps" +
                      (meta.epoch_step ? " and " + std::to_string(meta.epoch_step) + " steps of the next" : ""));
  }
  try {
    meta.classes = st::decode_string_list(get("classes"));
  } catch (const st::FormatError& e) {
    throw ConfigError("checkpoint " + path + " has a malformed class list: " + shown(e.what()));
  }
  if (meta.classes.empty() || meta.classes.size() > (1u << 20)) {
    throw ConfigError("checkpoint " + path + " lists " + std::to_string(meta.classes.size()) + " classes");
  }
  return meta;
}

st::File read(const std::string& path) {
  try {
    return st::read_file(path);
  } catch (const st::FormatError& e) {
    throw ConfigError(std::string("cannot load checkpoint: ") + e.what());
  }
}

// Copies the stored tensor into `target` after checking dtype and shape; names the tensor when they differ.
void copy_checked(at::Tensor target, const st::File& file, const std::string& key, const std::string& path) {
  const st::TensorView* view = file.find(key);
  if (!view) throw ConfigError("checkpoint " + path + " has no tensor '" + key + "'");
  if (c10::IntArrayRef(view->shape) != target.sizes() || to_scalar_type(view->dtype) != target.scalar_type()) {
    throw ConfigError("checkpoint " + path + ": '" + key + "' is " + st::dtype_name(view->dtype) + " " +
                      c10::str(c10::IntArrayRef(view->shape)) + ", the model's " + c10::toString(target.scalar_type()) +
                      " " + c10::str(target.sizes()));
  }
  const at::Tensor stored = at::from_blob(const_cast<uint8_t*>(view->data), view->shape, target.scalar_type());
  target.copy_(stored);
}

// How a file's model tensors (optimizer and extra state aside) differ from the model's, by name: each list in the
// model's order (extra: the file's), at most one lookup a name.
struct Differences {
  std::vector<std::string> missing, misshaped, mistyped, extra;
};

Differences differences(const st::File& file, const NamedTensors& targets) {
  Differences d;
  for (const auto& [name, target] : targets) {
    const st::TensorView* view = file.find(name);
    if (!view) {
      d.missing.push_back(name);
    } else if (c10::IntArrayRef(view->shape) != target.sizes()) {
      d.misshaped.push_back(name + " (" + c10::str(c10::IntArrayRef(view->shape)) + ", the model's " +
                            c10::str(target.sizes()) + ")");
    } else if (to_scalar_type(view->dtype) != target.scalar_type()) {
      d.mistyped.push_back(name + " (" + st::dtype_name(view->dtype) + ", the model's " +
                           st::dtype_name(to_dtype(target.scalar_type())) + ")");
    }
  }
  // The model's names once, as a set: a file may hold a million tensors, each looked up here.
  std::unordered_set<std::string> known;
  for (const auto& item : targets) known.insert(item.first);
  for (const auto& t : file.tensors) {
    if (!known.count(t.name) && !is_optimizer_state(t.name) && t.name.rfind(kExtraPrefix, 0) != 0)
      d.extra.push_back(t.name);
  }
  return d;
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string join(const std::vector<std::string>& names) {
  std::string out;
  for (size_t i = 0; i < names.size() && i < 8; ++i) out += (i ? ", " : "") + names[i];
  if (names.size() > 8) out += ", ... (" + std::to_string(names.size()) + " in all)";
  return out;
}

// One line for the first kind of difference, after `who` ("config key 'init_from': PATH", ...).
void refuse(const Differences& d, const std::string& who) {
  if (!d.missing.empty()) throw ConfigError(who + " lacks " + join(d.missing));
  if (!d.misshaped.empty()) throw ConfigError(who + " has mis-shaped " + join(d.misshaped));
  if (!d.mistyped.empty()) throw ConfigError(who + " has tensors of another dtype: " + join(d.mistyped));
  if (!d.extra.empty()) throw ConfigError(who + " has tensors the model lacks: " + join(d.extra));
}

}  // namespace

NamedTensors named_state(const torch::nn::Module& model) {
  NamedTensors out;
  for (const auto& p : model.named_parameters()) out.emplace_back(p.key(), p.value());
  for (const auto& b : model.named_buffers()) out.emplace_back(b.key(), b.value());
  return out;
}

void save_checkpoint(const std::string& path, torch::nn::Module& model, const Optimizer& optimizer,
                     const CheckpointMeta& meta, const ExtraState& extra) {
  NamedTensors tensors = named_state(model);
  for (const auto& item : optimizer.state()) tensors.push_back(item);
  for (const auto& [name, value] : extra) tensors.emplace_back(kExtraPrefix + name, value);
  std::vector<at::Tensor> host;  // keeps the CPU copies alive while the views point at them
  std::vector<st::TensorView> views;
  for (const auto& [name, tensor] : tensors) {
    host.push_back(tensor.detach().to(at::kCPU).contiguous());
    const at::Tensor& t = host.back();
    views.push_back({name, to_dtype(t.scalar_type()), t.sizes().vec(), static_cast<const uint8_t*>(t.data_ptr()),
                     static_cast<size_t>(t.nbytes())});
  }
  const std::map<std::string, std::string> metadata = {{"format", kFormat},
                                                       {"model", meta.model},
                                                       {"optimizer", optimizer.name()},
                                                       {"epoch", std::to_string(meta.epoch)},
                                                       {"step", std::to_string(meta.step)},
                                                       {"seed", std::to_string(meta.seed)},
                                                       {"classes", st::encode_string_list(meta.classes)},
                                                       {"batch_size", std::to_string(meta.batch_size)},
                                                       {"steps_per_epoch", std::to_string(meta.steps_per_epoch)},
                                                       {"epoch_step", std::to_string(meta.epoch_step)}};
  files::write_atomically(path, st::serialize(views, metadata));
}

CheckpointMeta read_checkpoint_meta(const std::string& path) { return meta_of(read(path), path); }

CheckpointMeta load_checkpoint(const std::string& path, torch::nn::Module& model, Optimizer& optimizer,
                               const ExtraState& extra) {
  const st::File file = read(path);
  const CheckpointMeta meta = meta_of(file, path);
  if (meta.optimizer != optimizer.name()) {
    throw ConfigError("config key 'optimizer': " + path + " holds " + meta.optimizer + "'s state and this run uses " +
                      optimizer.name() + "; resume with optimizer: " + meta.optimizer);
  }
  torch::NoGradGuard no_grad;
  size_t expected = 0;
  for (const auto& p : model.named_parameters()) {
    copy_checked(p.value(), file, p.key(), path);
    ++expected;
  }
  for (const auto& b : model.named_buffers()) {
    copy_checked(b.value(), file, b.key(), path);
    ++expected;
  }
  for (const auto& [name, value] : optimizer.state()) {
    copy_checked(value, file, name, path);
    ++expected;
  }
  size_t stored_extra = 0;
  for (const auto& t : file.tensors) stored_extra += t.name.rfind(kExtraPrefix, 0) == 0;
  for (const auto& [name, value] : extra) {
    if (file.find(kExtraPrefix + name)) copy_checked(value, file, kExtraPrefix + name, path);
  }
  if (file.tensors.size() - stored_extra != expected) {
    throw ConfigError("checkpoint " + path + " holds " + std::to_string(file.tensors.size()) + " tensors, the model " +
                      "and optimizer " + std::to_string(expected));
  }
  return meta;
}

std::string load_weights(const std::string& path, torch::nn::Module& model, const std::string& classifier_name,
                         bool new_classifier) {
  return load_weights(read(path), path, model, classifier_name, new_classifier);
}

std::string load_weights(const st::File& file, const std::string& path, torch::nn::Module& model,
                         const std::string& classifier_name, bool new_classifier) {
  const NamedTensors targets = named_state(model);
  auto in_classifier = [&](const std::string& name) { return name.rfind(classifier_name + ".", 0) == 0; };
  Differences d = differences(file, targets);
  // A count of BatchNorm's updates, absent from older state dicts: 0, as torchvision's loading makes it.
  auto counter = [](const std::string& name) { return ends_with(name, ".num_batches_tracked"); };
  const auto counters = std::count_if(d.missing.begin(), d.missing.end(), counter);
  d.missing.erase(std::remove_if(d.missing.begin(), d.missing.end(), counter), d.missing.end());
  // Another class count (the classifier's shapes differ): it keeps its initialisation, the start of fine-tuning. Its
  // dtype differing is no class count, and an error like any other tensor's.
  const bool classifier_differs =
      new_classifier && !d.misshaped.empty() &&
      std::all_of(d.misshaped.begin(), d.misshaped.end(), [&](const std::string& name) { return in_classifier(name); });
  if (classifier_differs) d.misshaped.clear();
  refuse(d, (new_classifier ? "config key 'init_from': " : "") + path);  // rn50 infer's errors name no key

  torch::NoGradGuard no_grad;
  for (const auto& [name, target] : targets) {
    if (classifier_differs && in_classifier(name)) continue;
    if (counters && counter(name) && !file.find(name)) {
      target.zero_();
      continue;
    }
    copy_checked(target, file, name, path);
  }
  const std::string zeroed = counters ? strprintf(" (%lld num_batches_tracked absent: 0, as torchvision sets them)",
                                                  static_cast<long long>(counters))
                                      : "";
  return (classifier_differs
              ? "loaded all but the classifier '" + classifier_name + "' (its shape differs: fine-tuning)"
              : "loaded all " + std::to_string(targets.size()) + " tensors") +
         zeroed;
}

CheckpointMeta export_weights(const std::string& checkpoint_path, const std::string& out_path) {
  const st::File file = read(checkpoint_path);
  const CheckpointMeta meta = meta_of(file, checkpoint_path);
  // What is written must load into the model the checkpoint names: its tensors against that model's, built from the
  // registry (a misnamed or extra tensor was exported, and rn50 infer refused the file).
  std::shared_ptr<models::Classifier> model;
  try {
    model = models::create(meta.model, {1, false});
  } catch (const ConfigError&) {
    std::string known;
    for (const auto& n : models::names()) known += (known.empty() ? "" : ", ") + n;
    throw ConfigError("checkpoint " + checkpoint_path + " holds a '" + shown(meta.model) +
                      "', which is no model rn50 has (" + known + ")");
  }
  // A one-class build names the classifier; its tensor must hold the listed classes before the model is built at
  // that count (a forged list of a million names would take gigabytes first).
  const std::string classifier = model->classifier_name() + ".weight";
  const st::TensorView* fc = file.find(classifier);
  const auto classes = static_cast<int64_t>(meta.classes.size());
  if (!fc) throw ConfigError("checkpoint " + checkpoint_path + " lacks " + classifier);
  if (fc->shape.size() != 2 || fc->shape[0] != classes) {
    std::string shape;
    for (const int64_t d : fc->shape) shape += (shape.empty() ? "" : ", ") + std::to_string(d);
    throw ConfigError("checkpoint " + checkpoint_path + " has mis-shaped " + classifier + " ([" + shape + "] for the " +
                      std::to_string(classes) + " classes it lists)");
  }
  if (classes != 1) model = models::create(meta.model, {classes, false});
  refuse(differences(file, named_state(*model)), "checkpoint " + checkpoint_path);
  std::vector<st::TensorView> views;
  for (const auto& t : file.tensors) {
    if (!is_optimizer_state(t.name) && t.name.rfind(kExtraPrefix, 0) != 0) views.push_back(t);
  }
  const std::map<std::string, std::string> metadata = {{"format", "pt"},
                                                       {"model", meta.model},
                                                       {"classes", st::encode_string_list(meta.classes)},
                                                       {"epochs", std::to_string(meta.epoch)},
                                                       {"producer", "rn50 export"}};
  files::write_atomically(out_path, st::serialize(views, metadata));
  return meta;
}

}  // namespace rn50::trainer
