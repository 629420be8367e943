// The benchmarks' machine-readable output: one JSON line per result on
// stdout after the table, and the same lines in `path` when one is given.
#pragma once

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace gpt::bench {

inline void print_json_lines(const std::vector<nlohmann::json>& results, const std::string& path) {
  std::ofstream file;
  if (!path.empty()) file.open(path);
  for (const auto& r : results) {
    std::printf("%s\n", r.dump().c_str());
    if (file) file << r.dump() << "\n";
  }
}

}  // namespace gpt::bench
