// core/errors.h: the exception types that become one-line user-facing errors.
#pragma once

#include <stdexcept>
#include <string>

namespace rn50 {

// Bad configuration: unknown key, bad value, conflicting options. The message names the key.
struct ConfigError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Bad dataset layout: missing root, empty split, empty class folder. Detected before training starts.
struct DataError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Training diverged: the loss and the weights are no longer finite (a learning rate too high, say). No step after it
// can mend the weights, so the run stops before it writes anything from them.
struct DivergedError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// One image that cannot be used (unreadable, not a JPEG, truncated, corrupt).
struct DecodeError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// The first line of an exception's message: LibTorch's (c10::Error) carry a stack trace after it.
inline std::string first_line(const std::string& text) { return text.substr(0, text.find('\n')); }

}  // namespace rn50
