// JSON-lines metrics writer: one object per line, flushed per line so a
// crashed run keeps every completed step. Only the log rank writes.
#pragma once

#include <cstdio>
#include <string>

#include <nlohmann/json.hpp>

namespace gpt {

class MetricsWriter {
 public:
  MetricsWriter() = default;
  // Empty path: a no-op writer. append: continue an existing file (a resumed
  // run). Throws DataError if the file cannot be created.
  explicit MetricsWriter(const std::string& path, bool append = false);
  ~MetricsWriter();
  MetricsWriter(const MetricsWriter&) = delete;
  MetricsWriter& operator=(const MetricsWriter&) = delete;
  void write(const nlohmann::json& record);

 private:
  std::FILE* f_ = nullptr;
};

}  // namespace gpt
