// tests/core/test_shared_library.cpp: SharedLibrary opens a system library and finds its functions, and names a
// library that cannot be opened in one line.
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "core/shared_library.h"
#include "tests/support/temp_dir.h"

namespace rn50 {
namespace {

// glibc's maths library: on every Linux machine, in a file of its own since glibc 2.34 merged libdl and libpthread.
constexpr const char* kLibm = "libm.so.6";

TEST(SharedLibrary, OpensByNameFindsAFunctionAndCallsIt) {
  std::string why_not;
  const auto library = SharedLibrary::open(kLibm, &why_not);
  ASSERT_TRUE(library) << why_not;
  EXPECT_EQ(library->name(), kLibm);
  auto* cosine = reinterpret_cast<double (*)(double)>(library->find("cos"));
  ASSERT_NE(cosine, nullptr);
  EXPECT_DOUBLE_EQ(cosine(0.0), 1.0);
  // The file the loader chose, for a reason that names it: a full path, not the bare name.
  EXPECT_EQ(library->path().front(), '/') << library->path();
  EXPECT_NE(library->path().find("libm"), std::string::npos) << library->path();
}

TEST(SharedLibrary, AMissingSymbolIsNull) {
  const auto library = SharedLibrary::open(kLibm, nullptr);
  ASSERT_TRUE(library);
  EXPECT_EQ(library->find("rn50_no_such_function"), nullptr);
}

TEST(SharedLibrary, AMissingLibraryGivesOneLineNamingIt) {
  std::string why_not;
  EXPECT_FALSE(SharedLibrary::open("librn50-does-not-exist.so.1", &why_not));
  EXPECT_EQ(why_not.rfind("cannot open librn50-does-not-exist.so.1: ", 0), 0u) << why_not;
  EXPECT_NE(why_not.find("No such file"), std::string::npos) << why_not;
  EXPECT_EQ(why_not.find('\n'), std::string::npos) << why_not;
}

// What a container sees where a library's file is there but empty or not a library (a host path mounted over it).
TEST(SharedLibrary, AFileThatIsNoLibraryGivesOneLineNamingIt) {
  testing::TempDir dir;
  const std::string path = dir.file("libfake.so.1");
  std::ofstream(path) << "not a library\n";
  std::string why_not;
  EXPECT_FALSE(SharedLibrary::open(path, &why_not));
  EXPECT_EQ(why_not.rfind("cannot open " + path + ": ", 0), 0u) << why_not;
  EXPECT_EQ(why_not.find('\n'), std::string::npos) << why_not;
}

TEST(SharedLibrary, AnEmptyNameIsRefused) {
  std::string why_not;
  EXPECT_FALSE(SharedLibrary::open("", &why_not));
  EXPECT_EQ(why_not, "no library named (an empty name)");
}

}  // namespace
}  // namespace rn50
