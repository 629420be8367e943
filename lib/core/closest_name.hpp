// The likely intended name for a mistyped one, for errors that reject an
// unknown flag or key: "unknown flag --stategy (did you mean --strategy?)".
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace gpt {

// Edits (insertions, deletions, substitutions, and swaps of two neighbours)
// that turn `a` into `b` (the optimal string alignment distance).
int edit_distance(std::string_view a, std::string_view b);

// The candidate nearest `word`, when it is near enough to be a typo of it:
// at most 2 edits, and fewer than a third of the longer name's length (so
// that 'lr' is not offered for 'xy'). "" when none is, or when two
// candidates are equally near.
std::string closest_name(std::string_view word, const std::vector<std::string>& candidates);

// " (did you mean X?)", with `prefix` before the name ("--"), or "" when
// closest_name finds none.
std::string did_you_mean(std::string_view word, const std::vector<std::string>& candidates,
                         std::string_view prefix = {});

// The error for a command-line argument that no option took, `flags` being
// the program's long option names without their "--": "command line: unknown
// flag --stategy (did you mean --strategy?)" (also for --stategy=zero3), or
// "command line: unexpected argument 'zero3'" for one that is not a flag.
std::string unknown_argument(std::string_view arg, const std::vector<std::string>& flags);

}  // namespace gpt
