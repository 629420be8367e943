// A shared library opened when first needed rather than linked, and its
// entry points resolved by name: how the CUDA backend reaches cuBLASLt
// (model/cuda/cublaslt_api.hpp) and cuDNN (model/cuda/cudnn_api.hpp), so
// that a process which never calls them does not pay for loading them.
#pragma once

#include <string>
#include <vector>

namespace gpt {

struct SharedLibrary {
  void* handle = nullptr;
  std::string path;  // the candidate that opened
};

// Opens the first of `candidates` that loads (RTLD_NOW | RTLD_LOCAL: nothing
// else in the process binds to its symbols). Throws gpt::Error
// "cannot open <what>: <each candidate's reason> (<hint>)" when none does.
SharedLibrary open_first_library(const std::vector<std::string>& candidates, const std::string& what,
                                 const std::string& hint);

// The address of `name` in `lib`. Throws gpt::Error
// "<path> has no <name> (<reason>): <mismatch>" when it has none.
void* library_symbol(const SharedLibrary& lib, const char* name, const std::string& mismatch);

template <typename Fn>
void resolve_symbol(const SharedLibrary& lib, const char* name, Fn& fn, const std::string& mismatch) {
  fn = reinterpret_cast<Fn>(library_symbol(lib, name, mismatch));
}

// Closes a library none of whose entry points will be called.
void close_library(SharedLibrary& lib);

}  // namespace gpt
