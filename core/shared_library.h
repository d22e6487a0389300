// core/shared_library.h: SharedLibrary, a shared library opened at run time (dlopen) and its functions found by name.
#pragma once

#include <memory>
#include <string>
#include <utility>

namespace rn50 {

// A library rn50 needs only for some commands (the GPU driver's NVML): opened when first needed rather than linked,
// so that a host without it still runs every command that does not need it. Closed when the object dies.
class SharedLibrary {
 public:
  // Opens `name` where the dynamic loader searches (LD_LIBRARY_PATH, the loader's cache, the system's folders), or
  // a path. nullptr where it cannot be opened, with a one-line reason naming it in *why_not (when not null).
  static std::unique_ptr<SharedLibrary> open(const std::string& name, std::string* why_not);
  ~SharedLibrary();
  SharedLibrary(const SharedLibrary&) = delete;
  SharedLibrary& operator=(const SharedLibrary&) = delete;

  // The address of the function or variable `symbol`, or nullptr where the library has none.
  void* find(const char* symbol) const;
  // The file the loader opened (a full path, where `name` was a bare library name).
  std::string path() const;
  const std::string& name() const { return name_; }

 private:
  SharedLibrary(std::string name, void* handle) : name_(std::move(name)), handle_(handle) {}
  std::string name_;
  void* handle_;
};

}  // namespace rn50
