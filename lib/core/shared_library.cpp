#include "core/shared_library.hpp"

#include <dlfcn.h>
#include <fmt/format.h>

#include "core/error.hpp"

namespace gpt {

SharedLibrary open_first_library(const std::vector<std::string>& candidates, const std::string& what,
                                 const std::string& hint) {
  std::string tried;
  for (const std::string& path : candidates) {
    if (void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL)) return {handle, path};
    const char* why = dlerror();
    tried += fmt::format("{}{}", tried.empty() ? "" : "; ", why ? why : path);
  }
  throw Error(fmt::format("cannot open {}: {} ({})", what, tried.empty() ? "no candidate file names" : tried, hint));
}

void* library_symbol(const SharedLibrary& lib, const char* name, const std::string& mismatch) {
  dlerror();
  void* sym = dlsym(lib.handle, name);
  if (!sym) {
    const char* why = dlerror();
    throw Error(fmt::format("{} has no {} ({}): {}", lib.path, name, why ? why : "null symbol", mismatch));
  }
  return sym;
}

void close_library(SharedLibrary& lib) {
  if (lib.handle) dlclose(lib.handle);
  lib.handle = nullptr;
}

}  // namespace gpt
