#include "core/bytes.hpp"

#include <cctype>
#include <cmath>

#include "core/error.hpp"

namespace gpt {

int64_t parse_bytes(const std::string& text, const std::string& what) {
  size_t pos = 0;
  while (pos < text.size() && (std::isdigit(static_cast<unsigned char>(text[pos])) || text[pos] == '.')) ++pos;
  const std::string num = text.substr(0, pos);
  std::string unit = text.substr(pos);
  for (char& ch : unit) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  static const struct {
    const char* suffix;
    double mult;
  } units[] = {{"", 1},          {"B", 1},         {"K", 0x1p10},    {"KIB", 0x1p10}, {"KB", 1e3},
               {"M", 0x1p20},    {"MIB", 0x1p20},  {"MB", 1e6},      {"G", 0x1p30},   {"GIB", 0x1p30},
               {"GB", 1e9},      {"T", 0x1p40},    {"TIB", 0x1p40},  {"TB", 1e12}};
  for (const auto& u : units) {
    if (unit != u.suffix || num.empty()) continue;
    try {
      size_t used = 0;
      const double v = std::stod(num, &used);
      if (used == num.size() && std::isfinite(v) && v >= 0) return static_cast<int64_t>(std::llround(v * u.mult));
    } catch (const std::exception&) {
    }
    break;
  }
  throw ConfigError(fmt::format("invalid {} = '{}': expected a size such as 4096, 128M, 80GiB or 80GB", what, text));
}

std::string format_bytes(double b) {
  const double a = std::fabs(b);
  if (a >= 0x1p30) return fmt::format("{:.2f} GiB", b / 0x1p30);
  if (a >= 0x1p20) return fmt::format("{:.1f} MiB", b / 0x1p20);
  if (a >= 0x1p10) return fmt::format("{:.1f} KiB", b / 0x1p10);
  return fmt::format("{:.0f} B", b);
}

}  // namespace gpt
