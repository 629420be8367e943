#include "model/recompute.hpp"

#include <fmt/format.h>

#include "core/error.hpp"

namespace gpt {

Recompute parse_recompute(const std::string& name) {
  if (name == "none") return Recompute::kNone;
  if (name == "gelu") return Recompute::kGelu;
  if (name == "gelu-ln") return Recompute::kGeluLn;
  throw ConfigError(fmt::format("invalid recompute = '{}': expected none, gelu or gelu-ln", name));
}

const char* to_string(Recompute r) {
  switch (r) {
    case Recompute::kNone: return "none";
    case Recompute::kGelu: return "gelu";
    case Recompute::kGeluLn: return "gelu-ln";
  }
  return "none";
}

}  // namespace gpt
