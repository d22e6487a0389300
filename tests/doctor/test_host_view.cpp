// tests/doctor/test_host_view.cpp: MachineView reads only below its root (files, folders, links), and opens libraries
// through the loader with its one-line reason where it cannot; the path helpers.
#include <gtest/gtest.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "doctor/host_view.h"
#include "tests/support/files.h"
#include "tests/support/temp_dir.h"

namespace rn50::doctor {
namespace {

void write_text(const std::string& path, const std::string& text) {
  rn50::testing::write_file(path, std::vector<uint8_t>(text.begin(), text.end()));
}

TEST(MachineView, ReadsBelowItsRoot) {
  rn50::testing::TempDir root;
  write_text(root.file("sys/class/infiniband/mlx5_1/ports/1/state"), "4: ACTIVE\n");
  write_text(root.file("sys/class/infiniband/mlx5_0/ports/1/state"), "1: DOWN\n");
  ASSERT_EQ(::symlink("../../../bus/pci/drivers/mlx5_core", root.file("sys/class/infiniband/mlx5_0/driver").c_str()),
            0);
  const MachineView view(root.path());
  EXPECT_EQ(view.read_text("/sys/class/infiniband/mlx5_1/ports/1/state"), "4: ACTIVE\n");
  EXPECT_EQ(view.read_text("/sys/class/infiniband/mlx5_9/ports/1/state"), std::nullopt);
  EXPECT_EQ(view.read_text("/sys/class/infiniband"), std::nullopt);  // a folder is no text
  EXPECT_EQ(view.entries("/sys/class/infiniband"), (std::vector<std::string>{"mlx5_0", "mlx5_1"}));  // sorted
  EXPECT_TRUE(view.entries("/sys/class/net").empty());
  EXPECT_TRUE(view.exists("/sys/class/infiniband/mlx5_0/ports"));
  EXPECT_FALSE(view.exists("/sys/class/infiniband/mlx5_0/driver"));  // a link whose target is not there
  EXPECT_EQ(view.link_target("/sys/class/infiniband/mlx5_0/driver"), "../../../bus/pci/drivers/mlx5_core");
  EXPECT_EQ(view.link_target("/sys/class/infiniband/mlx5_0/ports/1/state"), std::nullopt);  // no link
}

// The real root: /proc's files report a size of 0 and are read to their end all the same.
TEST(MachineView, ReadsProcFilesWhoseSizeIsZero) {
  const MachineView view;
  const auto maps = view.read_text("/proc/self/maps");
  ASSERT_TRUE(maps);
  EXPECT_NE(maps->find("/"), std::string::npos) << *maps;
}

TEST(MachineView, ReadsTheEnvironment) {
  const MachineView view;
  setenv("RN50_TEST_HOST_VIEW", "mlx5_0:1", 1);
  EXPECT_EQ(view.variable("RN50_TEST_HOST_VIEW"), "mlx5_0:1");
  unsetenv("RN50_TEST_HOST_VIEW");
  EXPECT_EQ(view.variable("RN50_TEST_HOST_VIEW"), std::nullopt);
}

// libm stands in for libibverbs, which this machine need not have.
TEST(MachineView, OpensALibraryOrSaysWhyNotInOneLine) {
  const MachineView view;
  const LibraryOpen libm = view.open_library("libm.so.6");
  EXPECT_TRUE(libm.opened) << libm.why_not;
  EXPECT_NE(libm.path.find("libm"), std::string::npos) << libm.path;
  const LibraryOpen missing = view.open_library("librn50-no-such-verbs.so.1");
  EXPECT_FALSE(missing.opened);
  EXPECT_EQ(missing.why_not.rfind("cannot open librn50-no-such-verbs.so.1: ", 0), 0u) << missing.why_not;
  EXPECT_EQ(missing.why_not.find('\n'), std::string::npos);
}

TEST(HostViewPaths, BaseNameAndFolder) {
  EXPECT_EQ(base_name("../../../bus/pci/drivers/mlx5_core"), "mlx5_core");
  EXPECT_EQ(base_name("libcuda.so.1"), "libcuda.so.1");
  EXPECT_EQ(folder_of("/opt/rn50/bin/rn50"), "/opt/rn50/bin");
  EXPECT_EQ(folder_of("/rn50"), "/");
  EXPECT_EQ(folder_of("rn50"), "");
}

}  // namespace
}  // namespace rn50::doctor
