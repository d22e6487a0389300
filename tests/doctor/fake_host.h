// tests/doctor/fake_host.h: FakeHost, a HostView whose files lie in a temporary folder standing in for /, with the
// environment and the loader's answers a test sets.
#pragma once

#include <unistd.h>

#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "doctor/host_view.h"
#include "tests/support/files.h"
#include "tests/support/temp_dir.h"

namespace rn50::doctor::testing {

class FakeHost final : public HostView {
 public:
  std::map<std::string, std::string> environment;  // unset where absent
  std::map<std::string, std::string> libraries;    // library name -> the path it opens from; absent: not found

  // A file at `path` (below the fake root) holding `text`, its folders made.
  void write(const std::string& path, const std::string& text) const {
    rn50::testing::write_file(root_.path() + path, std::vector<uint8_t>(text.begin(), text.end()));
  }
  void make_folder(const std::string& path) const { rn50::testing::make_dirs(root_.path() + path); }
  // A symbolic link at `path` pointing to `target`, written as given (relative or absolute).
  void link(const std::string& path, const std::string& target) const {
    make_folder(folder_of(path));
    if (::symlink(target.c_str(), (root_.path() + path).c_str()) != 0) throw std::runtime_error("symlink " + path);
  }

  std::optional<std::string> read_text(const std::string& path) const override { return files_.read_text(path); }
  std::vector<std::string> entries(const std::string& folder) const override { return files_.entries(folder); }
  bool exists(const std::string& path) const override { return files_.exists(path); }
  std::optional<std::string> link_target(const std::string& path) const override { return files_.link_target(path); }
  std::optional<std::string> variable(const std::string& name) const override {
    const auto found = environment.find(name);
    return found == environment.end() ? std::nullopt : std::optional<std::string>(found->second);
  }
  LibraryOpen open_library(const std::string& library) const override {
    const auto found = libraries.find(library);
    if (found == libraries.end()) return {false, "", library + ": cannot open shared object file"};
    return {true, found->second, ""};
  }

 private:
  rn50::testing::TempDir root_;  // before files_, which reads below it
  MachineView files_{root_.path()};
};

}  // namespace rn50::doctor::testing
