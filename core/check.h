// core/check.h: RN50_CHECK_STATUS, the one mechanism under the CUDA, cuDNN, nvJPEG and NVML checks: a call whose
// status is not its library's success throws std::runtime_error "file:line: expression failed: reason".
#pragma once

#include <stdexcept>
#include <string>

namespace rn50 {

[[noreturn]] inline void throw_call_failed(const char* expr, const char* file, int line, const std::string& reason) {
  throw std::runtime_error(std::string(file) + ":" + std::to_string(line) + ": " + expr + " failed: " + reason);
}

}  // namespace rn50

// Each library's header defines its macro in one line over this one, naming its status type, its success value and
// the function that turns a status into the reason (text: the call as written, stringified by the outer macro).
#define RN50_CHECK_STATUS(Status, success, describe, expr, text)                                                \
  do {                                                                                                          \
    const Status rn50_status_ = (expr);                                                                         \
    if (rn50_status_ != (success)) ::rn50::throw_call_failed(text, __FILE__, __LINE__, describe(rn50_status_)); \
  } while (0)
