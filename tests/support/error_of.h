// tests/support/error_of.h: the message of the exception of a given type that a call throws ("" when it throws none).
#pragma once

#include <functional>
#include <string>

#include "core/errors.h"

namespace rn50::testing {

// Exceptions of other types pass through, so that a test sees a wrong type as an error of its own.
template <typename E>
std::string error_of(const std::function<void()>& call) {
  try {
    call();
  } catch (const E& e) {
    return e.what();
  }
  return "";
}

inline std::string config_error_of(const std::function<void()>& call) { return error_of<ConfigError>(call); }

}  // namespace rn50::testing
