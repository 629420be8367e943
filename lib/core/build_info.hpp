#pragma once
// What a program was built from, for --version, the start-up log and the
// metrics header: runs compared across a sweep or a bug report name the
// commit that ran, not the one the tree holds later.
//
// this_build() is generated at every build (cmake/build_info.cmake) into
// the gpt_build_info library, which only the programs link: a new commit
// relinks them, not every test. A program's main hands it to
// set_program_build() before anything reads program_build(); without that
// (tests that run the trainer in-process) program_build() says "unknown".
#include <string>

namespace gpt {

struct BuildInfo {
  std::string revision = "unknown";     // git's short commit, "-dirty" with local changes; or GPT_GIT_REVISION
  std::string build_type;               // CMAKE_BUILD_TYPE
  std::string cuda_architectures = "none";  // e.g. "80 90 100"; "none" in a CPU-only build
};

BuildInfo this_build();  // defined by the generated source (gpt_build_info)

void set_program_build(BuildInfo b);
const BuildInfo& program_build();

// "gpt_train 05b1964c1a2b (Release; CUDA architectures 80 90 100)"
std::string version_line(const std::string& program, const BuildInfo& b);

}  // namespace gpt
