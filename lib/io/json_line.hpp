// One line of a JSON-lines file (prepare_data's documents, HellaSwag's
// examples) parsed as an object, with the file and line in every error.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace gpt {

// Throws DataError "FILE:LINE: not JSON: column N: ..." or
// "FILE:LINE: not a JSON object".
nlohmann::json parse_json_object_line(std::string_view text, const std::string& file, int64_t line);

}  // namespace gpt
