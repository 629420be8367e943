// The multiples of a unit either side of a value, for errors that reject a
// count the unit does not divide: "6 or 9" (8 with unit 3), "8" (4 with
// unit 8: no positive multiple lies below it).
#pragma once

#include <cstdint>
#include <string>

#include <fmt/format.h>

namespace gpt {

// unit > 0; value >= 0.
inline std::string nearest_multiples(int64_t value, int64_t unit) {
  const int64_t below = value / unit * unit;
  if (below == value && value > 0) return fmt::format("{}", value);
  if (below == 0) return fmt::format("{}", unit);
  return fmt::format("{} or {}", below, below + unit);
}

}  // namespace gpt
