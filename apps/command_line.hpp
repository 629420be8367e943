// Command-line parsing for the tools (prepare_data, plan, ckpt_tool, and
// bench_comm's --help and --version), with gpt_train's conventions instead of CLI11's defaults:
// --help prints the help and --version what the tool was built from
// (core/build_info.hpp), each exiting 0; a bad flag or value prints one line
// 'error: command line: ...' to stderr and exits 1 (CLI11 alone prints the
// message without the prefix, a "Run with --help" line, and exits 105-110).
#pragma once

#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>

#include <CLI/CLI.hpp>

#include "core/build_info.hpp"
#include "io/parse_or_error.hpp"

namespace gpt {

// The exit status to return at once (0 after --help or --version, 1 after an error), or
// -1 when the command line parsed and the tool should run.
inline int parse_command_line(CLI::App& app, int argc, char** argv) {
  try {
    const std::string error = parse_or_error(app, argc, argv);
    if (error.empty()) return -1;
    std::fprintf(stderr, "error: %s\n", error.c_str());
    return 1;
  } catch (const CLI::CallForHelp&) {
    std::printf("%s", app.help().c_str());
    return 0;
  } catch (const CLI::CallForAllHelp&) {
    std::printf("%s", app.help("", CLI::AppFormatMode::All).c_str());
    return 0;
  } catch (const CLI::CallForVersion& e) {
    std::printf("%s\n", e.what());
    return 0;
  }
}

// Whether the command line asks for --help (-h) or --version. The MPI
// programs (gpt_train, bench_comm) answer those before MPI starts, so that
// they answer on a login node, without a launcher.
inline bool asks_for_help_or_version(int argc, char** argv) {
  for (int i = 1; i < argc; ++i)
    if (std::strcmp(argv[i], "--help") == 0 || std::strcmp(argv[i], "-h") == 0 ||
        std::strcmp(argv[i], "--version") == 0)
      return true;
  return false;
}

// --version for a tool: its name and what it was built from.
inline void add_version_flag(CLI::App& app, const std::string& program) {
  app.set_version_flag("--version", version_line(program, this_build()), "print what this program was built from");
}

// CLI11's PositiveNumber and NonNegativeNumber name a double's range in their
// message (up to 1.797e308); these name the integer range.
inline const CLI::Range kPositiveInt(1, 2147483647);
inline const CLI::Range kNonNegativeInt(0, 2147483647);

// A real number above `lo` (or at least it, `inclusive`) and at most `hi`,
// named that way in the error.
inline CLI::Validator real_range(double lo, bool inclusive, double hi = HUGE_VAL) {
  const std::string lower = std::string(inclusive ? ">= " : "> ") + CLI::detail::to_string(lo);
  const std::string name = std::isinf(hi) ? "NUMBER " + lower : lower + " and <= " + CLI::detail::to_string(hi);
  return CLI::Validator(
      [=](std::string& in) -> std::string {
        double x = 0;
        if (!CLI::detail::lexical_cast(in, x)) return "Value " + in + " is not a number";
        const bool ok = (inclusive ? x >= lo : x > lo) && x <= hi;
        return ok ? std::string() : "Value " + in + " is not " + name.substr(name.find_first_of("<>"));
      },
      name);
}
inline const CLI::Validator kPositiveReal = real_range(0, false);
inline const CLI::Validator kNonNegativeReal = real_range(0, true);
inline const CLI::Validator kFraction = real_range(0, false, 1);  // (0, 1]

}  // namespace gpt
