// tests/fuzz/fuzz_config.cpp: libFuzzer target for the YAML configuration parser and the range checks.
// Any input either gives a configuration that validates and survives a dump-and-reload unchanged, or is refused with
// ConfigError; anything else is a finding.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "core/config.h"
#include "core/errors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  rn50::Config config;
  try {
    rn50::apply_yaml_text(config, std::string(reinterpret_cast<const char*>(data), size), "fuzz input");
    rn50::validate(config);
  } catch (const rn50::ConfigError&) {
    return 0;
  }
  const std::string dump = rn50::to_yaml(config);
  rn50::Config reloaded;
  rn50::apply_yaml_text(reloaded, dump, "dump");  // a dump that does not load again is a finding: it escapes
  rn50::validate(reloaded);
  if (rn50::to_yaml(reloaded) != dump) std::abort();
  return 0;
}
