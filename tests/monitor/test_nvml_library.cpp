// tests/monitor/test_nvml_library.cpp: the NVML library chosen by RN50_NVML_LIBRARY, and the one-line reasons where
// it cannot be opened or lacks a function (no GPU or driver needed: another system library stands in).
#include <gtest/gtest.h>

#include <cstdlib>
#include <optional>
#include <string>

#include "core/shared_library.h"
#include "monitor/nvml_library.h"

namespace rn50::monitor {
namespace {

// Sets RN50_NVML_LIBRARY (or unsets it, for nullopt) for one test and restores it after.
class NvmlLibraryVariable {
 public:
  explicit NvmlLibraryVariable(const std::optional<std::string>& value) {
    if (const char* old = std::getenv(kNvmlLibraryVariable)) saved_ = old;
    if (value)
      setenv(kNvmlLibraryVariable, value->c_str(), 1);
    else
      unsetenv(kNvmlLibraryVariable);
  }
  ~NvmlLibraryVariable() {
    if (saved_)
      setenv(kNvmlLibraryVariable, saved_->c_str(), 1);
    else
      unsetenv(kNvmlLibraryVariable);
  }

 private:
  std::optional<std::string> saved_;
};

TEST(NvmlLibrary, TheDriversLibraryUnlessTheVariableNamesAnother) {
  {
    NvmlLibraryVariable unset(std::nullopt);
    EXPECT_EQ(nvml_library_name(), "libnvidia-ml.so.1");
  }
  {
    NvmlLibraryVariable empty(std::string{});
    EXPECT_EQ(nvml_library_name(), "libnvidia-ml.so.1");
  }
  NvmlLibraryVariable chosen(std::string("/opt/driver/libnvidia-ml.so.1"));
  EXPECT_EQ(nvml_library_name(), "/opt/driver/libnvidia-ml.so.1");
}

// How scripts/runtime-libs.sh hides NVML on a GPU host: a name that does not exist, and the reason says who chose it.
TEST(NvmlLibrary, ANameThatDoesNotExistGivesOneLineWithTheVariable) {
  NvmlLibraryVariable hidden(std::string("librn50-no-nvml.so.1"));
  std::string why_not;
  EXPECT_FALSE(load_nvml_library({{"nvmlInit_v2"}}, &why_not));
  EXPECT_EQ(why_not.rfind("cannot open librn50-no-nvml.so.1: ", 0), 0u) << why_not;
  const std::string tail = " (RN50_NVML_LIBRARY=librn50-no-nvml.so.1)";
  ASSERT_GE(why_not.size(), tail.size());
  EXPECT_EQ(why_not.substr(why_not.size() - tail.size()), tail) << why_not;
  EXPECT_EQ(why_not.find('\n'), std::string::npos) << why_not;
}

// A host without the driver: the reason says where NVML comes from. Where this machine has the driver, there is
// nothing to see.
TEST(NvmlLibrary, WithoutTheDriverTheReasonSaysWhereNvmlComesFrom) {
  NvmlLibraryVariable unset(std::nullopt);
  if (SharedLibrary::open("libnvidia-ml.so.1", nullptr)) GTEST_SKIP() << "this machine has the NVIDIA driver's NVML";
  std::string why_not;
  EXPECT_FALSE(load_nvml_library({{"nvmlInit_v2"}}, &why_not));
  EXPECT_EQ(why_not.rfind("cannot open libnvidia-ml.so.1: ", 0), 0u) << why_not;
  EXPECT_NE(why_not.find("NVML comes with the NVIDIA driver; a container needs --gpus"), std::string::npos) << why_not;
  EXPECT_EQ(why_not.find('\n'), std::string::npos) << why_not;
}

TEST(NvmlLibrary, FindsEachSymbolInOrderAndLeavesAMissingOptionalOneNull) {
  NvmlLibraryVariable libm(std::string("libm.so.6"));
  std::string why_not;
  const auto loaded = load_nvml_library({{"sin"}, {"rn50_newer_than_this_driver", false}, {"cos"}}, &why_not);
  ASSERT_TRUE(loaded) << why_not;
  ASSERT_EQ(loaded->addresses.size(), 3u);
  EXPECT_EQ(loaded->addresses[0], loaded->library->find("sin"));
  EXPECT_NE(loaded->addresses[0], nullptr);
  EXPECT_EQ(loaded->addresses[1], nullptr);
  EXPECT_EQ(loaded->addresses[2], loaded->library->find("cos"));
  EXPECT_NE(loaded->addresses[2], loaded->addresses[0]);
}

TEST(NvmlLibrary, AMissingRequiredSymbolNamesItAndTheFile) {
  NvmlLibraryVariable libm(std::string("libm.so.6"));
  std::string why_not;
  EXPECT_FALSE(load_nvml_library({{"cos"}, {"nvmlGpmSampleGet"}}, &why_not));
  EXPECT_EQ(why_not.front(), '/') << why_not;  // the file the loader opened
  EXPECT_NE(why_not.find("libm"), std::string::npos) << why_not;
  EXPECT_NE(why_not.find(" has no nvmlGpmSampleGet: the NVIDIA driver is older"), std::string::npos) << why_not;
  EXPECT_EQ(why_not.find('\n'), std::string::npos) << why_not;
}

}  // namespace
}  // namespace rn50::monitor
