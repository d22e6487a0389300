// trainer/checkpoint.cpp: checkpoints as one pickled dictionary (torch.load reads it too), written atomically.
#include "trainer/checkpoint.h"

#include <ATen/core/Dict.h>
#include <ATen/core/ivalue.h>
#include <fcntl.h>
#include <torch/nn/module.h>
#include <torch/serialize.h>
#include <torch/utils.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>

#include "core/errors.h"
#include "trainer/sgd.h"

namespace rn50::trainer {
namespace {

using Dict = c10::impl::GenericDict;

Dict make_dict() { return Dict(c10::StringType::get(), c10::AnyType::get()); }

void write_file_atomically(const std::string& path, const std::vector<char>& bytes) {
  const std::string tmp = path + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) throw std::runtime_error("cannot write checkpoint " + tmp + ": " + std::strerror(errno));
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0) {
      const int err = errno;
      ::close(fd);
      throw std::runtime_error("cannot write checkpoint " + tmp + ": " + std::strerror(err));
    }
    done += static_cast<size_t>(n);
  }
  // The data must be on disk before the rename makes it the checkpoint.
  if (::fsync(fd) != 0 || ::close(fd) != 0) throw std::runtime_error("cannot flush checkpoint " + tmp);
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    throw std::runtime_error("cannot rename " + tmp + " to " + path + ": " + std::strerror(errno));
  }
}

Dict read_dict(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ConfigError("cannot read checkpoint: " + path);
  const std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  c10::IValue root;
  try {
    root = torch::pickle_load(bytes);
  } catch (const std::exception& e) {
    throw ConfigError("not an rn50 checkpoint (unreadable): " + path);
  }
  if (!root.isGenericDict()) throw ConfigError("not an rn50 checkpoint: " + path);
  return root.toGenericDict();
}

c10::IValue get(const Dict& dict, const std::string& key, const std::string& path) {
  if (!dict.contains(key)) throw ConfigError("checkpoint " + path + " has no '" + key + "'");
  return dict.at(key);
}

CheckpointMeta meta_of(const Dict& dict, const std::string& path) {
  CheckpointMeta meta;
  meta.model = get(dict, "model", path).toStringRef();
  meta.epoch = get(dict, "epoch", path).toInt();
  meta.step = get(dict, "step", path).toInt();
  meta.seed = get(dict, "seed", path).toInt();
  for (const auto& name : get(dict, "classes", path).toListRef()) meta.classes.push_back(name.toStringRef());
  return meta;
}

// Copies `source` into `target` after checking the shape; names the tensor when they differ.
void copy_checked(at::Tensor target, const c10::IValue& source, const std::string& name, const std::string& path) {
  if (!source.isTensor()) throw ConfigError("checkpoint " + path + ": '" + name + "' is not a tensor");
  const at::Tensor& t = source.toTensor();
  if (t.sizes() != target.sizes()) {
    throw ConfigError("checkpoint " + path + ": '" + name + "' has shape " + c10::str(t.sizes()) + ", the model " +
                      c10::str(target.sizes()));
  }
  target.copy_(t);
}

}  // namespace

void save_checkpoint(const std::string& path, torch::nn::Module& model, const Sgd& sgd, const CheckpointMeta& meta) {
  Dict weights = make_dict(), momentum = make_dict(), root = make_dict();
  for (const auto& p : model.named_parameters()) weights.insert(p.key(), p.value().detach().cpu());
  for (const auto& b : model.named_buffers()) weights.insert(b.key(), b.value().detach().cpu());
  for (const auto& [name, buffer] : sgd.momentum_buffers()) momentum.insert(name, buffer.detach().cpu());
  c10::List<std::string> classes;
  for (const auto& c : meta.classes) classes.push_back(c);
  root.insert("format", std::string("rn50-checkpoint-1"));
  root.insert("model", meta.model);
  root.insert("epoch", meta.epoch);
  root.insert("step", meta.step);
  root.insert("seed", meta.seed);
  root.insert("classes", classes);
  root.insert("state_dict", weights);
  root.insert("momentum", momentum);
  write_file_atomically(path, torch::pickle_save(root));
}

CheckpointMeta read_checkpoint_meta(const std::string& path) { return meta_of(read_dict(path), path); }

CheckpointMeta load_checkpoint(const std::string& path, torch::nn::Module& model, Sgd& sgd) {
  const Dict root = read_dict(path);
  const CheckpointMeta meta = meta_of(root, path);
  const auto weights = get(root, "state_dict", path).toGenericDict();
  const auto momentum = get(root, "momentum", path).toGenericDict();
  torch::NoGradGuard no_grad;
  size_t expected = 0;
  for (const auto& p : model.named_parameters()) {
    copy_checked(p.value(), get(weights, p.key(), path), p.key(), path);
    ++expected;
  }
  for (const auto& b : model.named_buffers()) {
    copy_checked(b.value(), get(weights, b.key(), path), b.key(), path);
    ++expected;
  }
  if (weights.size() != expected) {
    throw ConfigError("checkpoint " + path + " holds " + std::to_string(weights.size()) + " tensors, the model " +
                      std::to_string(expected));
  }
  for (const auto& [name, buffer] : sgd.momentum_buffers()) {
    copy_checked(buffer, get(momentum, name, path), "momentum of " + name, path);
  }
  return meta;
}

}  // namespace rn50::trainer
