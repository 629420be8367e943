// A --trace file (io/trace_writer.hpp) read back for tests: each rank's
// slices by name, and its collectives' issue -> completion intervals by
// operation.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace gpt::test {

struct Slice {
  std::string name;  // "forward h.1", "wait all_gather", ...
  double b = 0, e = 0;  // microseconds
};

struct ParsedTrace {
  std::map<int, std::vector<Slice>> slices;                              // by rank, in file order
  std::map<int, std::map<std::string, std::vector<Slice>>> collectives;  // by rank, then operation
  // Rank r's slices named `name` or, with a trailing '*', starting with it.
  std::vector<Slice> named(int rank, const std::string& name) const;
};

// Adds a gtest failure (and returns what it could read) on a missing file,
// a malformed event, a negative duration or an async end without a begin.
ParsedTrace read_trace(const std::string& path);

}  // namespace gpt::test
