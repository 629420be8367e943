#include "core/error.hpp"

namespace gpt {

void throw_internal(const char* cond, const char* file, int line, const std::string& msg) {
  throw InternalError(fmt::format("internal check failed: {} ({}) at {}:{}", msg, cond, file, line));
}

}  // namespace gpt
