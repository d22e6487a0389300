// tests/core/test_check.cpp: RN50_CHECK_STATUS, the mechanism under the CUDA, cuDNN, nvJPEG and NVML checks, with a
// stand-in library whose status is an int.
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

#include "core/check.h"

namespace rn50 {
namespace {

constexpr int kFakeSuccess = 0;
int calls = 0;

int fake_call(int status) {
  ++calls;
  return status;
}

std::string fake_describe(int status) { return "FAKE_STATUS_" + std::to_string(status); }

#define FAKE_CHECK(expr) RN50_CHECK_STATUS(int, kFakeSuccess, fake_describe, expr, #expr)

TEST(CheckStatus, SuccessPassesAndEvaluatesTheCallOnce) {
  calls = 0;
  FAKE_CHECK(fake_call(kFakeSuccess));
  EXPECT_EQ(calls, 1);
}

TEST(CheckStatus, FailureThrowsNamingFileLineCallAndReason) {
  calls = 0;
  const int line = __LINE__ + 2;
  try {
    FAKE_CHECK(fake_call(7));
    FAIL() << "no throw";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()),
              std::string(__FILE__) + ":" + std::to_string(line) + ": fake_call(7) failed: FAKE_STATUS_7");
  }
  EXPECT_EQ(calls, 1);
}

}  // namespace
}  // namespace rn50
