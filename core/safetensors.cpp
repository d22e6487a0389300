// core/safetensors.cpp: safetensors serialisation and a parser that checks every offset before use.
#include "core/safetensors.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <new>
#include <nlohmann/json.hpp>

#include "core/files.h"
#include "core/limits.h"
#include "core/log.h"
#include "core/utf8.h"

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
// A header is {name: {dtype, shape: [dims], data_offsets: [b, e]}}: depth 3. Deeper JSON is refused while it is
// parsed, before anything recurses through it (printing a value 50,000 lists deep overflowed the stack).
constexpr int kMaxJsonDepth = 8;
constexpr size_t kMaxTensors = 1u << 20;
constexpr size_t kMaxRank = 8;

[[noreturn]] void fail(const std::string& origin, const std::string& what) {
  throw FormatError(origin + ": not a valid safetensors file: " + what);
}

// A value for an error message, bounded: a short scalar as written, a long one cut, a list or object by its kind.
std::string excerpt(const nlohmann::json& value) {
  if (value.is_array()) return "a list of " + std::to_string(value.size());
  if (value.is_object()) return "an object of " + std::to_string(value.size()) + " keys";
  std::string text = value.dump();
  if (text.size() > 40) text = text.substr(0, 40) + "...";
  return text;
}

std::string excerpt(const std::string& name) { return name.size() > 60 ? name.substr(0, 60) + "..." : name; }

// One tensor's entry, checked against the data's size; `data` holds its offset until the storage exists.
TensorView parse_entry(const std::string& name, const nlohmann::json& entry, size_t data_size,
                       const std::string& origin) {
  const std::string shown = "tensor '" + excerpt(name) + "'";
  if (!entry.is_object() || !entry.contains("dtype") || !entry.contains("shape") || !entry.contains("data_offsets")) {
    fail(origin, shown + " lacks dtype, shape or data_offsets");
  }
  TensorView view;
  view.name = name;
  const auto& dtype = entry["dtype"];
  const auto known = std::find_if(std::begin(kDTypes), std::end(kDTypes), [&](const DTypeInfo& d) {
    return dtype.is_string() && dtype.get_ref<const std::string&>() == d.name;
  });
  if (known == std::end(kDTypes)) fail(origin, shown + " has unknown dtype " + excerpt(dtype));
  view.dtype = known->dtype;
  const auto& shape = entry["shape"];
  if (!shape.is_array()) fail(origin, shown + " has a shape that is not a list");
  if (shape.size() > kMaxRank) fail(origin, shown + " has " + std::to_string(shape.size()) + " dimensions");
  size_t numel = 1;
  for (const auto& d : shape) {
    if (!d.is_number_unsigned()) fail(origin, shown + " has a bad dimension " + excerpt(d));
    const uint64_t dim = d.get<uint64_t>();
    if (dim > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) ||
        (dim != 0 && numel > std::numeric_limits<size_t>::max() / 16 / dim))
      fail(origin, shown + " is too large");
    numel *= dim;
    view.shape.push_back(static_cast<int64_t>(dim));
  }
  const auto& offsets = entry["data_offsets"];
  if (!offsets.is_array() || offsets.size() != 2 || !offsets[0].is_number_unsigned() ||
      !offsets[1].is_number_unsigned()) {
    fail(origin, shown + " has data_offsets that are not two non-negative integers");
  }
  const uint64_t begin = offsets[0].get<uint64_t>(), end = offsets[1].get<uint64_t>();
  if (begin > end || end > data_size) {
    fail(origin, shown + " has offsets [" + std::to_string(begin) + ", " + std::to_string(end) + "] outside the " +
                     std::to_string(data_size) + " data bytes");
  }
  if (end - begin != numel * known->size) {
    fail(origin, shown + " has " + std::to_string(end - begin) + " bytes, its dtype and shape need " +
                     std::to_string(numel * known->size));
  }
  view.bytes = end - begin;
  view.data = reinterpret_cast<const uint8_t*>(begin);
  return view;
}

// The header as a stream of parse events: each top-level member is built as a small JSON value of its own and
// checked as soon as it ends, so that parsing takes time linear in the header's size and holds one entry at a time.
// (nlohmann's parser with a callback, used before, scanned the whole header object after each member: 12,500
// tensors took 1.8 s, 50,000 took 32 s, and a 60 MB header of a million never finished.) Nesting deeper than
// kMaxJsonDepth is refused as it opens, before anything recurses through it.
class HeaderReader final : public nlohmann::json_sax<nlohmann::json> {
 public:
  HeaderReader(size_t data_size, const std::string& origin, File& file)
      : data_size_(data_size), origin_(origin), file_(file) {}

  bool null() override { return value(nullptr); }
  bool boolean(bool v) override { return value(v); }
  bool number_integer(number_integer_t v) override { return value(v); }
  bool number_unsigned(number_unsigned_t v) override { return value(v); }
  bool number_float(number_float_t v, const string_t&) override { return value(v); }
  bool string(string_t& v) override { return value(std::move(v)); }
  bool binary(binary_t&) override { fail(origin_, "header is not JSON (binary value)"); }
  bool start_object(std::size_t) override { return open(nlohmann::json::object()); }
  bool start_array(std::size_t) override { return open(nlohmann::json::array()); }
  bool key(string_t& k) override {
    key_ = std::move(k);
    return true;
  }
  bool end_object() override { return close(); }
  bool end_array() override { return close(); }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e) override {
    const std::string what = e.what();
    fail(origin_, "header is not JSON (" + (what.size() > 120 ? what.substr(0, 120) + "..." : what) + ")");
  }

  const std::vector<std::pair<size_t, size_t>>& ranges() const { return ranges_; }

 private:
  // A scalar: the header itself must not be one; a member's whole value, or a part of it.
  bool value(nlohmann::json v) {
    if (depth_ == 0) fail(origin_, "header is not a JSON object");
    if (depth_ == 1) {
      entry_name_ = std::move(key_);
      entry_ = std::move(v);
      finish_entry();
    } else {
      add(std::move(v));
    }
    return true;
  }

  bool open(nlohmann::json container) {
    if (depth_ == 0 && !container.is_object()) fail(origin_, "header is not a JSON object");
    if (depth_ >= kMaxJsonDepth) fail(origin_, "header JSON nested deeper than " + std::to_string(kMaxJsonDepth));
    if (depth_ == 1) {
      entry_name_ = std::move(key_);
      entry_ = std::move(container);
      open_.push_back(&entry_);
    } else if (depth_ > 1) {
      open_.push_back(add(std::move(container)));
    }
    ++depth_;
    return true;
  }

  bool close() {
    --depth_;
    if (depth_ == 0) return true;  // the header's end
    open_.pop_back();
    if (depth_ == 1) finish_entry();
    return true;
  }

  // Into the innermost open container of the current member; the added value's address stays valid while it is
  // open, since nothing else is added to its parent until it closes.
  nlohmann::json* add(nlohmann::json v) {
    nlohmann::json& parent = *open_.back();
    if (parent.is_array()) {
      parent.push_back(std::move(v));
      return &parent.back();
    }
    nlohmann::json& slot = parent[key_];
    slot = std::move(v);
    return &slot;
  }

  void finish_entry() {
    if (entry_name_ == "__metadata__") {
      if (seen_metadata_) fail(origin_, "__metadata__ appears twice");
      seen_metadata_ = true;
      if (!entry_.is_object()) fail(origin_, "__metadata__ is not an object");
      for (auto m = entry_.begin(); m != entry_.end(); ++m) {
        if (!m.value().is_string()) fail(origin_, "__metadata__ value '" + excerpt(m.key()) + "' is not a string");
        file_.metadata[m.key()] = m.value().get<std::string>();
      }
    } else {
      if (file_.tensors.size() == kMaxTensors) fail(origin_, "more than " + std::to_string(kMaxTensors) + " tensors");
      file_.tensors.push_back(parse_entry(entry_name_, entry_, data_size_, origin_));
      const size_t begin = reinterpret_cast<size_t>(file_.tensors.back().data);
      ranges_.emplace_back(begin, begin + file_.tensors.back().bytes);
    }
    entry_ = nullptr;
  }

  const size_t data_size_;
  const std::string& origin_;
  File& file_;
  int depth_ = 0;                      // containers open, the header's own included
  std::string key_;                    // the latest key, for the value that follows it
  std::string entry_name_;             // the member being built
  nlohmann::json entry_;               // its value
  std::vector<nlohmann::json*> open_;  // its containers that are open, innermost last
  bool seen_metadata_ = false;
  std::vector<std::pair<size_t, size_t>> ranges_;
};

// The header's tensors (sorted by name) and metadata, every range checked against `data_size`, the data not yet read.
File parse_header(const uint8_t* json_begin, size_t json_size, size_t data_size, const std::string& origin) {
  File file;
  HeaderReader reader(data_size, origin, file);
  nlohmann::json::sax_parse(json_begin, json_begin + json_size, &reader);
  std::sort(file.tensors.begin(), file.tensors.end(),
            [](const TensorView& a, const TensorView& b) { return a.name < b.name; });
  for (size_t i = 1; i < file.tensors.size(); ++i) {
    if (file.tensors[i].name == file.tensors[i - 1].name)
      fail(origin, "tensor '" + excerpt(file.tensors[i].name) + "' appears twice");
  }
  std::vector<std::pair<size_t, size_t>> ranges = reader.ranges();
  std::sort(ranges.begin(), ranges.end());
  size_t covered = 0;
  for (const auto& [begin, end] : ranges) {
    if (begin < covered) fail(origin, "tensor data ranges overlap at byte " + std::to_string(begin));
    if (begin > covered)
      fail(origin, "bytes " + std::to_string(covered) + ".." + std::to_string(begin) + " belong to no tensor");
    covered = end;
  }
  if (covered != data_size) fail(origin, "bytes after " + std::to_string(covered) + " belong to no tensor");
  return file;
}

// The header length from the first 8 bytes, checked against the limit and the file's size.
uint64_t header_length(const uint8_t* first8, uint64_t file_size, const std::string& origin) {
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= static_cast<uint64_t>(first8[i]) << (8 * i);
  if (n > kMaxHeader) fail(origin, "header length " + std::to_string(n) + " exceeds 100 MiB");
  if (n > file_size - 8) {
    fail(origin, "header length " + std::to_string(n) + " runs past the end of the file (" + std::to_string(file_size) +
                     " bytes)");
  }
  return n;
}

// Points the tensors' views into the storage (their data fields hold offsets until now).
void settle(File& file, size_t data_start) {
  for (auto& t : file.tensors) t.data = file.storage.data() + data_start + reinterpret_cast<size_t>(t.data);
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
  // The header is written entry by entry (an ordered JSON object would look each key up in a list: quadratic), the
  // names and metadata escaped by nlohmann.
  std::string json = "{";
  if (!metadata.empty()) json += "\"__metadata__\":" + nlohmann::json(metadata).dump();
  std::vector<const std::string*> names;
  names.reserve(tensors.size());
  size_t offset = 0;
  for (const auto& t : tensors) {
    size_t numel = 1;
    for (int64_t d : t.shape) numel *= static_cast<size_t>(d);
    if (numel * element_size(t.dtype) != t.bytes) {
      throw std::invalid_argument("safetensors: tensor '" + t.name + "' has " + std::to_string(t.bytes) +
                                  " bytes, its shape needs " + std::to_string(numel * element_size(t.dtype)));
    }
    if (json.size() > 1) json += ',';
    json += nlohmann::json(t.name).dump() + ":{\"dtype\":\"" + dtype_name(t.dtype) + "\",\"shape\":[";
    for (size_t i = 0; i < t.shape.size(); ++i) json += (i ? "," : "") + std::to_string(t.shape[i]);
    json += "],\"data_offsets\":[" + std::to_string(offset) + "," + std::to_string(offset + t.bytes) + "]}";
    offset += t.bytes;
    names.push_back(&t.name);
  }
  json += '}';
  std::sort(names.begin(), names.end(), [](const std::string* a, const std::string* b) { return *a < *b; });
  for (size_t i = 1; i < names.size(); ++i) {
    if (*names[i] == *names[i - 1]) throw std::invalid_argument("safetensors: tensor '" + *names[i] + "' given twice");
  }
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
  const uint64_t n = header_length(bytes.data(), bytes.size(), origin);
  File file = parse_header(bytes.data() + 8, n, bytes.size() - 8 - n, origin);
  file.storage = std::move(bytes);
  settle(file, 8 + n);
  return file;
}

File read_file(const std::string& path) {
  try {
    const files::RegularFile in(path);
    const uint64_t size = in.size();
    if (size < 8) fail(path, "shorter than its 8-byte header length");
    uint8_t first8[8];
    in.read_at(first8, 8, 0);
    const uint64_t n = header_length(first8, size, path);
    // The header is checked before the data is read: a bad file costs its header's bytes, never its size.
    std::vector<uint8_t> json(n);
    in.read_at(json.data(), n, 8);
    File file = parse_header(json.data(), n, size - 8 - n, path);
    // The whole file is held: one larger than the memory this process may have is named, never a bare bad_alloc.
    uint64_t memory = physical_memory_bytes();
    if (const auto limit = read_cgroup_limits().memory_bytes; limit && (memory == 0 || *limit < memory))
      memory = *limit;
    if (memory > 0 && size > memory) {
      fail(path, strprintf("%.1f GiB, more than the %.1f GiB of memory this process may use", size / 1073741824.0,
                           memory / 1073741824.0));
    }
    try {
      file.storage.resize(size);
    } catch (const std::bad_alloc&) {
      fail(path, strprintf("%.1f GiB, more than this process could allocate", size / 1073741824.0));
    }
    std::memcpy(file.storage.data(), first8, 8);
    std::memcpy(file.storage.data() + 8, json.data(), n);
    in.read_at(file.storage.data() + 8 + n, size - 8 - n, 8 + n);
    settle(file, 8 + n);
    return file;
  } catch (const files::ReadError& e) {
    throw FormatError(e.what());
  }
}

std::string encode_string_list(const std::vector<std::string>& items) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out = "[";
  for (const std::string& item : items) {
    if (out.size() > 1) out += ',';
    out += '"';
    for (size_t at = 0; at < item.size();) {
      const auto c = static_cast<unsigned char>(item[at]);
      const size_t n = utf8::sequence_length(item, at);
      if (n == 0) {  // a byte that is not UTF-8: U+DC00 + its value, as Python's surrogateescape decodes it
        out += "\\udc";
        out += kHex[c >> 4];
        out += kHex[c & 15];
      } else if (c == '"' || c == '\\') {
        out += '\\';
        out += static_cast<char>(c);
      } else if (c < 0x20) {
        const char* named = c == '\b'   ? "\\b"
                            : c == '\f' ? "\\f"
                            : c == '\n' ? "\\n"
                            : c == '\r' ? "\\r"
                            : c == '\t' ? "\\t"
                                        : nullptr;
        if (named) {
          out += named;
        } else {
          out += "\\u00";
          out += kHex[c >> 4];
          out += kHex[c & 15];
        }
      } else {
        out.append(item, at, n);
      }
      at += n == 0 ? 1 : n;
    }
    out += '"';
  }
  return out + "]";
}

namespace {

// A strict reader of a JSON list of strings (what encode_string_list writes, and any JSON writer's list): nlohmann
// refuses the escapes U+DC80..U+DCFF stand alone, which here are the bytes encode_string_list escaped.
class StringListReader {
 public:
  explicit StringListReader(const std::string& json) : json_(json) {}

  std::vector<std::string> read() {
    std::vector<std::string> items;
    skip_space();
    expect('[');
    skip_space();
    if (peek() == ']') {
      ++at_;
    } else {
      for (;;) {
        items.push_back(string());
        skip_space();
        const char c = next();
        if (c == ']') break;
        if (c != ',') fail("',' or ']' expected");
        skip_space();
      }
    }
    skip_space();
    if (at_ != json_.size()) fail("text after the list");
    return items;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw FormatError("not a JSON list of strings: " + what + " at byte " + std::to_string(at_));
  }
  char peek() const { return at_ < json_.size() ? json_[at_] : '\0'; }
  char next() {
    if (at_ >= json_.size()) fail("the text ends");
    return json_[at_++];
  }
  void expect(char c) {
    if (next() != c) fail(std::string("'") + c + "' expected");
  }
  void skip_space() {
    while (at_ < json_.size() && (json_[at_] == ' ' || json_[at_] == '\t' || json_[at_] == '\n' || json_[at_] == '\r'))
      ++at_;
  }

  unsigned hex4() {
    unsigned v = 0;
    for (int i = 0; i < 4; ++i) {
      const char c = next();
      const int d = c >= '0' && c <= '9'   ? c - '0'
                    : c >= 'a' && c <= 'f' ? c - 'a' + 10
                    : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                           : -1;
      if (d < 0) fail("a bad \\u escape");
      v = v * 16 + static_cast<unsigned>(d);
    }
    return v;
  }

  std::string string() {
    expect('"');
    std::string out;
    for (;;) {
      const char c = next();
      if (c == '"') return out;
      if (static_cast<unsigned char>(c) < 0x20) fail("a control character in a string");
      if (c != '\\') {
        out += c;
        continue;
      }
      const char e = next();
      switch (e) {
        case '"':
        case '\\':
        case '/':
          out += e;
          break;
        case 'b':
          out += '\b';
          break;
        case 'f':
          out += '\f';
          break;
        case 'n':
          out += '\n';
          break;
        case 'r':
          out += '\r';
          break;
        case 't':
          out += '\t';
          break;
        case 'u': {
          unsigned cp = hex4();
          if (cp >= 0xDC80 && cp <= 0xDCFF) {  // an escaped byte that is not UTF-8
            out += static_cast<char>(cp - 0xDC00);
            break;
          }
          if (cp >= 0xD800 && cp <= 0xDBFF) {
            if (next() != '\\' || next() != 'u') fail("a lone surrogate");
            const unsigned low = hex4();
            if (low < 0xDC00 || low > 0xDFFF) fail("a lone surrogate");
            cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
          } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
            fail("a lone surrogate");
          }
          utf8::append(out, cp);
          break;
        }
        default:
          fail("a bad escape");
      }
    }
  }

  const std::string& json_;
  size_t at_ = 0;
};

}  // namespace

std::vector<std::string> decode_string_list(const std::string& json) { return StringListReader(json).read(); }

}  // namespace rn50::safetensors
