// core/shared_library.cpp: SharedLibrary over dlopen, dlsym and dlinfo.
#include "core/shared_library.h"

#include <dlfcn.h>
#include <link.h>

#include <algorithm>

namespace rn50 {
namespace {

// dlerror's text, on one line (it may hold a newline where a dependency of the library failed).
std::string last_dl_error() {
  const char* error = dlerror();
  std::string text = error ? error : "unknown dynamic loader error";
  std::replace(text.begin(), text.end(), '\n', ' ');
  return text;
}

}  // namespace

std::unique_ptr<SharedLibrary> SharedLibrary::open(const std::string& name, std::string* why_not) {
  if (name.empty()) {
    if (why_not) *why_not = "no library named (an empty name)";
    return nullptr;
  }
  // RTLD_NOW: a library that misses a dependency or a symbol fails here, not at its first call; RTLD_LOCAL: its
  // symbols do not leak into later lookups of other libraries.
  void* handle = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    if (why_not) *why_not = "cannot open " + name + ": " + last_dl_error();
    return nullptr;
  }
  return std::unique_ptr<SharedLibrary>(new SharedLibrary(name, handle));
}

SharedLibrary::~SharedLibrary() { dlclose(handle_); }

void* SharedLibrary::find(const char* symbol) const {
  dlerror();  // clears an earlier error: dlsym's nullptr is ambiguous only for symbols whose value is null
  return dlsym(handle_, symbol);
}

std::string SharedLibrary::path() const {
  link_map* map = nullptr;
  if (dlinfo(handle_, RTLD_DI_LINKMAP, &map) != 0 || !map || !map->l_name || !*map->l_name) return name_;
  return map->l_name;
}

}  // namespace rn50
