// One command-line parse for gpt_train and every tool (apps/command_line.hpp):
// CLI11's parse, with an argument that no option took named with what it
// likely meant rather than CLI11's error.
#pragma once

#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "core/closest_name.hpp"

namespace gpt {

// Parses the command line into `app`: "" when it parsed, else its error in one
// line ("command line: ..."). --help and --version are CLI11's exceptions, for
// the caller. An argument that no option took is kept rather than CLI11's
// error ("The following arguments were not expected: ...", in reverse order)
// and named with what it likely meant ("command line: unknown flag --inptu
// (did you mean --input?)"); it comes before any other error, which it may
// explain (the --input that a mistyped --inptu leaves missing).
inline std::string parse_or_error(CLI::App& app, int argc, const char* const* argv) {
  std::vector<CLI::App*> apps{&app};
  for (CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) apps.push_back(sub);
  for (CLI::App* a : apps) a->allow_extras();
  auto unknown = [&]() -> std::string {  // "" when every argument was taken
    const std::vector<std::string> extra = app.remaining(true);
    if (extra.empty()) return "";
    std::vector<std::string> flags, commands;
    for (CLI::App* a : apps) {
      if (a != &app) commands.push_back(a->get_name());
      for (const CLI::Option* o : a->get_options())
        for (const std::string& n : o->get_lnames()) flags.push_back(n);
    }
    std::string message = unknown_argument(extra.front(), flags);
    // A mistyped subcommand ('ckpt_tool lsit'): the subcommand it likely meant.
    if (extra.front().rfind('-', 0) != 0 && app.get_subcommands().empty())
      message += did_you_mean(extra.front(), commands);
    return message;
  };
  try {
    app.parse(argc, argv);
    return unknown();
  } catch (const CLI::Success&) {  // --help, --help-all, --version
    throw;
  } catch (const CLI::ParseError& e) {
    const std::string message = unknown();
    return message.empty() ? std::string("command line: ") + e.what() : message;
  }
}

}  // namespace gpt
