#include "io/metrics.hpp"

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "core/error.hpp"

namespace gpt {

MetricsWriter::MetricsWriter(const std::string& path, bool append) {
  if (path.empty()) return;
  const auto parent = std::filesystem::path(path).parent_path();
  if (!parent.empty()) std::filesystem::create_directories(parent);
  f_ = std::fopen(path.c_str(), append ? "a" : "w");
  if (!f_) throw DataError(fmt::format("{}: cannot create metrics file: {}", path, std::strerror(errno)));
}

MetricsWriter::~MetricsWriter() {
  if (f_) std::fclose(f_);
}

void MetricsWriter::write(const nlohmann::json& record) {
  if (!f_) return;
  const std::string line = record.dump() + "\n";
  std::fwrite(line.data(), 1, line.size(), f_);
  std::fflush(f_);
}

}  // namespace gpt
