// A count with its noun, singular or plural as English has it: "1 rank",
// "4 ranks", "1 node". For log lines and messages that name a count.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include <fmt/format.h>

namespace gpt {

// `plural` defaults to `noun` + "s".
inline std::string count_of(int64_t n, std::string_view noun, std::string_view plural = {}) {
  if (n == 1) return fmt::format("1 {}", noun);
  return plural.empty() ? fmt::format("{} {}s", n, noun) : fmt::format("{} {}", n, plural);
}

}  // namespace gpt
