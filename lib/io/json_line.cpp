#include "io/json_line.hpp"

#include <fmt/format.h>

#include "core/error.hpp"

namespace gpt {

nlohmann::json parse_json_object_line(std::string_view text, const std::string& file, int64_t line) {
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    // "[json.exception.parse_error.101] parse error at line 1, column 14: ..." -> "column 14: ..."
    std::string why = e.what();
    if (const size_t at = why.find("] "); at != std::string::npos) why.erase(0, at + 2);
    if (const std::string lead = "parse error at line 1, "; why.rfind(lead, 0) == 0) why.erase(0, lead.size());
    throw DataError(fmt::format("{}:{}: not JSON: {}", file, line, why));
  }
  if (!doc.is_object()) throw DataError(fmt::format("{}:{}: not a JSON object", file, line));
  return doc;
}

}  // namespace gpt
