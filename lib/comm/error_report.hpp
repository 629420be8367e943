// The lines a job prints for the errors its ranks end with. When every rank
// of a 256-rank job meets the same bad shard, the user wants one line, not
// 256; when one node lacks a file, the line must say which rank and host.
// MpiEnv::abort collects the ranks' reports at rank 0 and prints these lines
// (comm/mpi_env.cpp); this is the pure part: grouping and wording.
#pragma once

#include <string>
#include <vector>

namespace gpt {

struct ErrorReport {
  int rank = 0;
  std::string host;
  std::string message;
  // The error comes from input every rank reads alike (the config): it is
  // the job's error, whichever ranks reported it in time.
  bool same_on_all_ranks = false;
};

// "error: <message>" once per distinct message, in the order of the lowest
// rank that reported it. A message that every rank reported (or that is
// same_on_all_ranks) stands alone; any other names its reporters:
// "error: <message> (ranks 1-3, 7 on node2, node3)". At most 4 hosts are
// named, then "...". world_size 1: the message alone.
std::vector<std::string> error_lines(std::vector<ErrorReport> reports, int world_size);

// "rank 3", "ranks 0-2, 5, 7-8": ranks ascending, runs collapsed.
std::string rank_list(std::vector<int> ranks);

}  // namespace gpt
