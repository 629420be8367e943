// Logging through spdlog. The pattern carries the rank so interleaved output
// from many ranks stays readable; rank-0-only output goes through log0().
#pragma once

#include <spdlog/spdlog.h>

namespace gpt {

// Sets up the default logger for this process. Call once, after the rank is
// known. level: "trace" | "debug" | "info" | "warn" | "error".
void init_logging(int rank, int world_size, const std::string& level = "info");

// True on the rank that writes shared output (metrics, progress, samples).
bool is_log_rank();

// Logs on rank 0 only.
template <typename... Args>
void log0(spdlog::format_string_t<Args...> fmt, Args&&... args) {
  if (is_log_rank()) spdlog::info(fmt, std::forward<Args>(args)...);
}

// Warns on rank 0 only: for what every rank sees alike.
template <typename... Args>
void warn0(spdlog::format_string_t<Args...> fmt, Args&&... args) {
  if (is_log_rank()) spdlog::warn(fmt, std::forward<Args>(args)...);
}

}  // namespace gpt
