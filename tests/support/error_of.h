// tests/support/error_of.h: the message of the rn50::ConfigError a call throws ("" when it throws none).
#pragma once

#include <functional>
#include <string>

#include "core/errors.h"

namespace rn50::testing {

inline std::string config_error_of(const std::function<void()>& call) {
  try {
    call();
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

}  // namespace rn50::testing
