// core/safetensors.h: reading and writing the safetensors format, with every malformed-file case rejected.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

namespace rn50::safetensors {

// A malformed or unreadable file; the message names the file and the defect.
struct FormatError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

enum class DType { F64, F32, F16, BF16, I64, I32, I16, I8, U8, BOOL };
size_t element_size(DType dtype);
const char* dtype_name(DType dtype);

struct TensorView {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  const uint8_t* data = nullptr;  // little-endian, row-major
  size_t bytes = 0;
};

struct File {
  std::map<std::string, std::string> metadata;
  std::vector<TensorView> tensors;  // sorted by name; views into `storage`
  std::vector<uint8_t> storage;
  const TensorView* find(const std::string& name) const;
};

// The format (https://github.com/huggingface/safetensors): an 8-byte little-endian header length N, N
// bytes of JSON {name: {dtype, shape, data_offsets: [begin, end]}, "__metadata__": {string: string}},
// padded with spaces to a multiple of 8, then the data; offsets are relative to the data's start.
std::vector<uint8_t> serialize(const std::vector<TensorView>& tensors,
                               const std::map<std::string, std::string>& metadata);

// Rejects: a file shorter than 8 bytes, a header length past the end of the file, a header that is not
// a JSON object, unknown dtypes, bad shapes, offsets outside the data, a size that disagrees with the
// shape, overlapping ranges and bytes that no tensor covers. `origin` names the source in errors.
File parse(std::vector<uint8_t> bytes, const std::string& origin);
File read_file(const std::string& path);  // a regular file only (core/files.h); throws FormatError

// Metadata values are strings; a list of strings is stored as a JSON array. The items are bytes (class folder names
// are whatever the file system allows): each byte that is not part of well-formed UTF-8 is written as the escape
// \udcXX, U+DC00 plus its value, as Python's "surrogateescape" (PEP 383) reads such a byte: json.loads gives the
// str that os.listdir, and torchvision's ImageFolder, give for the same folder, and decode_string_list gives the
// bytes back. A list of UTF-8 names is written as nlohmann writes it.
std::string encode_string_list(const std::vector<std::string>& items);
std::vector<std::string> decode_string_list(const std::string& json);  // any JSON list of strings; throws FormatError

}  // namespace rn50::safetensors
