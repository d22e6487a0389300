// doctor/host_view.cpp: MachineView over POSIX calls below a root folder, getenv and core/shared_library.h's dlopen.
#include "doctor/host_view.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <memory>

#include "core/shared_library.h"

namespace rn50::doctor {
namespace {

// sysfs and procfs files are a line or a few; the cap only keeps a strange file from being read whole.
constexpr size_t kMaxTextBytes = 1 << 20;

}  // namespace

std::optional<std::string> MachineView::read_text(const std::string& path) const {
  // read() until it returns 0 rather than trusting the size: procfs files report 0, sysfs files 4096.
  const int fd = ::open((root_ + path).c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  std::string text;
  char chunk[4096];
  ssize_t n = 0;
  while (text.size() < kMaxTextBytes && (n = ::read(fd, chunk, sizeof chunk)) > 0)
    text.append(chunk, static_cast<size_t>(n));
  ::close(fd);
  if (n < 0) return std::nullopt;  // a folder, or a sysfs attribute the device refuses to read
  return text;
}

std::vector<std::string> MachineView::entries(const std::string& folder) const {
  std::vector<std::string> names;
  DIR* dir = ::opendir((root_ + folder).c_str());
  if (!dir) return names;
  while (const dirent* entry = ::readdir(dir)) {
    const std::string name = entry->d_name;
    if (name != "." && name != "..") names.push_back(name);
  }
  ::closedir(dir);
  std::sort(names.begin(), names.end());
  return names;
}

bool MachineView::exists(const std::string& path) const {
  struct stat st {};
  return ::stat((root_ + path).c_str(), &st) == 0;
}

std::optional<std::string> MachineView::link_target(const std::string& path) const {
  char buffer[4096];
  const ssize_t n = ::readlink((root_ + path).c_str(), buffer, sizeof buffer);
  if (n < 0 || static_cast<size_t>(n) >= sizeof buffer) return std::nullopt;
  return std::string(buffer, static_cast<size_t>(n));
}

std::optional<std::string> MachineView::variable(const std::string& name) const {
  const char* value = std::getenv(name.c_str());
  if (!value) return std::nullopt;
  return std::string(value);
}

LibraryOpen MachineView::open_library(const std::string& library) const {
  LibraryOpen result;
  const std::unique_ptr<SharedLibrary> opened = SharedLibrary::open(library, &result.why_not);
  result.opened = opened != nullptr;
  if (opened) result.path = opened->path();
  return result;
}

std::string base_name(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

std::string folder_of(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return "";
  return slash == 0 ? "/" : path.substr(0, slash);
}

}  // namespace rn50::doctor
