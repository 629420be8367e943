#include "core/build_info.hpp"

#include <fmt/format.h>

#include <utility>

namespace gpt {

namespace {
BuildInfo& current() {
  static BuildInfo b;
  return b;
}
}  // namespace

void set_program_build(BuildInfo b) { current() = std::move(b); }

const BuildInfo& program_build() { return current(); }

std::string version_line(const std::string& program, const BuildInfo& b) {
  return fmt::format("{} {} ({}; {})", program, b.revision, b.build_type.empty() ? "no build type" : b.build_type,
                     b.cuda_architectures == "none" ? std::string("CPU only: no CUDA code")
                                                    : "CUDA architectures " + b.cuda_architectures);
}

}  // namespace gpt
