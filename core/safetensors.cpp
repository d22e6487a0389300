// core/safetensors.cpp: safetensors serialisation and a parser that checks every offset before use.
#include "core/safetensors.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <limits>
#include <nlohmann/json.hpp>

namespace rn50::safetensors {
namespace {

struct DTypeInfo {
  DType dtype;
  const char* name;
  size_t size;
};
constexpr DTypeInfo kDTypes[] = {{DType::F64, "F64", 8},   {DType::F32, "F32", 4}, {DType::F16, "F16", 2},
                                 {DType::BF16, "BF16", 2}, {DType::I64, "I64", 8}, {DType::I32, "I32", 4},
                                 {DType::I16, "I16", 2},   {DType::I8, "I8", 1},   {DType::U8, "U8", 1},
                                 {DType::BOOL, "BOOL", 1}};

constexpr uint64_t kMaxHeader = 100u << 20;  // the reference implementation's limit

[[noreturn]] void fail(const std::string& origin, const std::string& what) {
  throw FormatError(origin + ": not a valid safetensors file: " + what);
}

}  // namespace

size_t element_size(DType dtype) {
  for (const auto& d : kDTypes) {
    if (d.dtype == dtype) return d.size;
  }
  return 0;
}

const char* dtype_name(DType dtype) {
  for (const auto& d : kDTypes) {
    if (d.dtype == dtype) return d.name;
  }
  return "?";
}

const TensorView* File::find(const std::string& name) const {
  const auto it = std::lower_bound(tensors.begin(), tensors.end(), name,
                                   [](const TensorView& t, const std::string& n) { return t.name < n; });
  return it != tensors.end() && it->name == name ? &*it : nullptr;
}

std::vector<uint8_t> serialize(const std::vector<TensorView>& tensors,
                               const std::map<std::string, std::string>& metadata) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  size_t offset = 0;
  for (const auto& t : tensors) {
    size_t numel = 1;
    for (int64_t d : t.shape) numel *= static_cast<size_t>(d);
    if (numel * element_size(t.dtype) != t.bytes) {
      throw std::invalid_argument("safetensors: tensor '" + t.name + "' has " + std::to_string(t.bytes) +
                                  " bytes, its shape needs " + std::to_string(numel * element_size(t.dtype)));
    }
    header[t.name] = {{"dtype", dtype_name(t.dtype)}, {"shape", t.shape}, {"data_offsets", {offset, offset + t.bytes}}};
    offset += t.bytes;
  }
  std::string json = header.dump();
  json.resize((json.size() + 7) / 8 * 8, ' ');  // 8-byte alignment of the data
  std::vector<uint8_t> out(8 + json.size() + offset);
  const uint64_t n = json.size();
  for (int i = 0; i < 8; ++i) out[i] = static_cast<uint8_t>(n >> (8 * i));
  std::memcpy(out.data() + 8, json.data(), json.size());
  uint8_t* data = out.data() + 8 + json.size();
  for (const auto& t : tensors) {
    if (t.bytes) std::memcpy(data, t.data, t.bytes);
    data += t.bytes;
  }
  return out;
}

File parse(std::vector<uint8_t> bytes, const std::string& origin) {
  if (bytes.size() < 8) fail(origin, "shorter than its 8-byte header length");
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= static_cast<uint64_t>(bytes[i]) << (8 * i);
  if (n > kMaxHeader) fail(origin, "header length " + std::to_string(n) + " exceeds 100 MiB");
  if (n > bytes.size() - 8) {
    fail(origin, "header length " + std::to_string(n) + " runs past the end of the file (" +
                     std::to_string(bytes.size()) + " bytes)");
  }
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(bytes.begin() + 8, bytes.begin() + 8 + static_cast<std::ptrdiff_t>(n));
  } catch (const nlohmann::json::exception& e) {
    fail(origin, std::string("header is not JSON (") + e.what() + ")");
  }
  if (!header.is_object()) fail(origin, "header is not a JSON object");

  File file;
  const size_t data_start = 8 + n;
  const size_t data_size = bytes.size() - data_start;
  std::vector<std::pair<size_t, size_t>> ranges;
  for (auto it = header.begin(); it != header.end(); ++it) {
    const std::string& name = it.key();
    const auto& entry = it.value();
    if (name == "__metadata__") {
      if (!entry.is_object()) fail(origin, "__metadata__ is not an object");
      for (auto m = entry.begin(); m != entry.end(); ++m) {
        if (!m.value().is_string()) fail(origin, "__metadata__ value '" + m.key() + "' is not a string");
        file.metadata[m.key()] = m.value().get<std::string>();
      }
      continue;
    }
    if (!entry.is_object() || !entry.contains("dtype") || !entry.contains("shape") || !entry.contains("data_offsets")) {
      fail(origin, "tensor '" + name + "' lacks dtype, shape or data_offsets");
    }
    TensorView view;
    view.name = name;
    const auto& dtype = entry["dtype"];
    const auto known = std::find_if(std::begin(kDTypes), std::end(kDTypes), [&](const DTypeInfo& d) {
      return dtype.is_string() && dtype.get<std::string>() == d.name;
    });
    if (known == std::end(kDTypes)) fail(origin, "tensor '" + name + "' has unknown dtype " + dtype.dump());
    view.dtype = known->dtype;
    const auto& shape = entry["shape"];
    if (!shape.is_array()) fail(origin, "tensor '" + name + "' has a shape that is not a list");
    size_t numel = 1;
    for (const auto& d : shape) {
      if (!d.is_number_unsigned()) fail(origin, "tensor '" + name + "' has a bad dimension " + d.dump());
      const uint64_t dim = d.get<uint64_t>();
      if (dim != 0 && numel > std::numeric_limits<size_t>::max() / 16 / dim)
        fail(origin, "tensor '" + name + "' is too large");
      numel *= dim;
      view.shape.push_back(static_cast<int64_t>(dim));
    }
    const auto& offsets = entry["data_offsets"];
    if (!offsets.is_array() || offsets.size() != 2 || !offsets[0].is_number_unsigned() ||
        !offsets[1].is_number_unsigned()) {
      fail(origin, "tensor '" + name + "' has data_offsets that are not two non-negative integers");
    }
    const uint64_t begin = offsets[0].get<uint64_t>(), end = offsets[1].get<uint64_t>();
    if (begin > end || end > data_size) {
      fail(origin, "tensor '" + name + "' has offsets [" + std::to_string(begin) + ", " + std::to_string(end) +
                       "] outside the " + std::to_string(data_size) + " data bytes");
    }
    if (end - begin != numel * known->size) {
      fail(origin, "tensor '" + name + "' has " + std::to_string(end - begin) + " bytes, its dtype and shape need " +
                       std::to_string(numel * known->size));
    }
    view.bytes = end - begin;
    ranges.emplace_back(begin, end);
    view.data = reinterpret_cast<const uint8_t*>(begin);  // offset for now; pointer once storage is final
    file.tensors.push_back(std::move(view));
  }
  std::sort(ranges.begin(), ranges.end());
  size_t covered = 0;
  for (const auto& [begin, end] : ranges) {
    if (begin < covered) fail(origin, "tensor data ranges overlap at byte " + std::to_string(begin));
    if (begin > covered)
      fail(origin, "bytes " + std::to_string(covered) + ".." + std::to_string(begin) + " belong to no tensor");
    covered = end;
  }
  if (covered != data_size) fail(origin, "bytes after " + std::to_string(covered) + " belong to no tensor");

  file.storage = std::move(bytes);
  for (auto& t : file.tensors) t.data = file.storage.data() + data_start + reinterpret_cast<size_t>(t.data);
  std::sort(file.tensors.begin(), file.tensors.end(),
            [](const TensorView& a, const TensorView& b) { return a.name < b.name; });
  return file;
}

File read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw FormatError("cannot read " + path);
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return parse(std::move(bytes), path);
}

std::string encode_string_list(const std::vector<std::string>& items) { return nlohmann::json(items).dump(); }

std::vector<std::string> decode_string_list(const std::string& json) {
  try {
    return nlohmann::json::parse(json).get<std::vector<std::string>>();
  } catch (const nlohmann::json::exception& e) {
    throw FormatError(std::string("not a JSON list of strings: ") + e.what());
  }
}

void write_file_atomically(const std::string& path, const std::vector<uint8_t>& bytes) {
  const std::string tmp = path + ".tmp";
  auto fail = [&](const std::string& what, int err) {
    ::unlink(tmp.c_str());  // never leave a partial file behind
    throw std::runtime_error(what + " " + tmp + ": " + std::strerror(err));
  };
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) fail("cannot create", errno);
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      ::close(fd);
      fail("cannot write", err);
    }
    done += static_cast<size_t>(n);
  }
  // The data must be on disk before the rename makes it the file.
  const int synced = ::fsync(fd) == 0 ? 0 : errno;
  const int closed = ::close(fd) == 0 ? 0 : errno;
  if (synced || closed) fail("cannot flush", synced ? synced : closed);
  if (std::rename(tmp.c_str(), path.c_str()) != 0) fail("cannot rename to " + path + ":", errno);
  // And the rename itself, which lives in the folder.
  const auto slash = path.find_last_of('/');
  const std::string folder = slash == std::string::npos ? "." : (slash == 0 ? "/" : path.substr(0, slash));
  const int dir = ::open(folder.c_str(), O_RDONLY | O_DIRECTORY);
  if (dir >= 0) {
    ::fsync(dir);
    ::close(dir);
  }
}

}  // namespace rn50::safetensors
