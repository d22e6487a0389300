// tests/fuzz/fuzz_safetensors.cpp: libFuzzer target for the safetensors reader (weights, checkpoints, infer).
// Any input either parses into views that lie inside the file and match their shapes, and serializes back to a file
// that parses the same, or is refused with FormatError; anything else (a crash, another exception, a sanitizer
// report, unbounded memory) is a finding.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "core/safetensors.h"

namespace st = rn50::safetensors;

namespace {

void require(bool ok) {
  if (!ok) std::abort();  // libFuzzer keeps the input that broke an invariant
}

void check_views(const st::File& f) {
  for (const st::TensorView& t : f.tensors) {
    size_t n = st::element_size(t.dtype);
    for (int64_t d : t.shape) {
      require(d >= 0);
      n *= static_cast<size_t>(d);
    }
    require(n == t.bytes);
    if (t.bytes == 0) continue;
    require(t.data >= f.storage.data() && t.data + t.bytes <= f.storage.data() + f.storage.size());
    volatile uint8_t touch = t.data[0] ^ t.data[t.bytes - 1];  // AddressSanitizer checks both ends
    (void)touch;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  st::File parsed;
  try {
    parsed = st::parse(std::vector<uint8_t>(data, data + size), "fuzz input");
  } catch (const st::FormatError&) {
    return 0;
  }
  check_views(parsed);
  const st::File again = st::parse(st::serialize(parsed.tensors, parsed.metadata), "round trip");
  require(again.tensors.size() == parsed.tensors.size() && again.metadata == parsed.metadata);
  for (size_t i = 0; i < parsed.tensors.size(); ++i) {
    require(again.tensors[i].name == parsed.tensors[i].name && again.tensors[i].shape == parsed.tensors[i].shape &&
            again.tensors[i].dtype == parsed.tensors[i].dtype && again.tensors[i].bytes == parsed.tensors[i].bytes);
  }
  for (const auto& [key, value] : parsed.metadata) {
    try {
      (void)st::decode_string_list(value);  // what checkpoint loading does with the class list
    } catch (const st::FormatError&) {
    }
  }
  return 0;
}
