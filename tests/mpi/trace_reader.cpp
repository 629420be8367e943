#include "trace_reader.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <fstream>

#include <nlohmann/json.hpp>

namespace gpt::test {

std::vector<Slice> ParsedTrace::named(int rank, const std::string& name) const {
  std::vector<Slice> out;
  const auto it = slices.find(rank);
  if (it == slices.end()) return out;
  const bool prefix = !name.empty() && name.back() == '*';
  const std::string stem = prefix ? name.substr(0, name.size() - 1) : name;
  for (const Slice& s : it->second)
    if (prefix ? s.name.rfind(stem, 0) == 0 : s.name == stem) out.push_back(s);
  return out;
}

ParsedTrace read_trace(const std::string& path) {
  ParsedTrace t;
  std::ifstream f(path);
  if (!f) {
    ADD_FAILURE() << "no trace at " << path;
    return t;
  }
  const nlohmann::json j = nlohmann::json::parse(f);
  if (!j.contains("traceEvents")) {
    ADD_FAILURE() << path << " has no traceEvents";
    return t;
  }
  std::map<int64_t, double> begins;  // async begin time by (id, rank)
  for (const auto& e : j["traceEvents"]) {
    if (!e.contains("ph") || !e.contains("pid") || !e.contains("name")) {
      ADD_FAILURE() << path << ": an event without ph, pid or name: " << e.dump();
      continue;
    }
    const std::string ph = e["ph"], name = e["name"];
    const int pid = e["pid"];
    t.slices[pid];  // every rank appears, with or without slices
    if (ph == "X") {
      EXPECT_GE(double(e["dur"]), 0.0) << name;
      t.slices[pid].push_back({name, e["ts"], double(e["ts"]) + double(e["dur"])});
    } else if (ph == "b") {
      begins[int64_t(e["id"]) * 64 + pid] = e["ts"];
    } else if (ph == "e") {
      const auto it = begins.find(int64_t(e["id"]) * 64 + pid);
      if (it == begins.end()) {
        ADD_FAILURE() << path << ": async end without begin: " << e.dump();
        continue;
      }
      t.collectives[pid][name].push_back({name, it->second, e["ts"]});
    }
  }
  return t;
}

}  // namespace gpt::test
