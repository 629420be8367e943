#include "core/logging.hpp"

#include <spdlog/sinks/stdout_color_sinks.h>

namespace gpt {
namespace {
int g_rank = 0;  // written once by init_logging before any other thread starts
}

void init_logging(int rank, int world_size, const std::string& level) {
  g_rank = rank;
  // stderr so that stdout stays clean for tools that print tables / JSON.
  auto logger = spdlog::stderr_color_mt("gpt");
  int width = static_cast<int>(std::to_string(std::max(world_size - 1, 0)).size());
  logger->set_pattern(fmt::format("[%H:%M:%S.%e] [rank {:0{}d}] [%^%l%$] %v", rank, width));
  logger->set_level(spdlog::level::from_str(level));
  spdlog::set_default_logger(logger);
}

bool is_log_rank() { return g_rank == 0; }

}  // namespace gpt
