// doctor/host_view.h: HostView, what the doctor reads of the machine around its process (files under /sys, /proc,
// /dev and the library folders, environment variables, libraries the loader can open), and MachineView, the real one.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace rn50::doctor {

// Whether the dynamic loader could open a library: the file it opened, or its one-line reason.
struct LibraryOpen {
  bool opened = false;
  std::string path;     // where it was found (opened)
  std::string why_not;  // the loader's reason (not opened)
};

// The doctor's rows about the driver and the network read through this interface, so that tests hand them a fake
// tree (a temporary folder standing in for /), their own environment and their own answer for each library.
class HostView {
 public:
  virtual ~HostView() = default;
  // A small text file (sysfs, procfs); nullopt where it cannot be read.
  virtual std::optional<std::string> read_text(const std::string& path) const = 0;
  // The names in a folder, sorted, without "." and ".."; empty where it is no folder or cannot be read.
  virtual std::vector<std::string> entries(const std::string& folder) const = 0;
  // Whether something exists at `path` (a link counts where its target exists).
  virtual bool exists(const std::string& path) const = 0;
  // Where a symbolic link points, as it is written; nullopt where `path` is no link.
  virtual std::optional<std::string> link_target(const std::string& path) const = 0;
  // An environment variable's value; nullopt where it is unset.
  virtual std::optional<std::string> variable(const std::string& name) const = 0;
  // Opens `library` as the loader would for NCCL (dlopen: LD_LIBRARY_PATH, the cache, the system's folders), and
  // closes it again.
  virtual LibraryOpen open_library(const std::string& library) const = 0;
};

// This machine: files below `root` ("" for /; a test's fake tree otherwise), this process's environment and loader.
class MachineView : public HostView {
 public:
  explicit MachineView(std::string root = "") : root_(std::move(root)) {}
  std::optional<std::string> read_text(const std::string& path) const override;
  std::vector<std::string> entries(const std::string& folder) const override;
  bool exists(const std::string& path) const override;
  std::optional<std::string> link_target(const std::string& path) const override;
  std::optional<std::string> variable(const std::string& name) const override;
  LibraryOpen open_library(const std::string& library) const override;

 private:
  std::string root_;
};

// The last component of a path ("/sys/bus/pci/drivers/mlx5_core" -> "mlx5_core").
std::string base_name(const std::string& path);
// A path without its last component ("/opt/rn50/bin/rn50" -> "/opt/rn50/bin"; "/" for "/x"; "" for "x").
std::string folder_of(const std::string& path);

}  // namespace rn50::doctor
