#include "comm/error_report.hpp"

#include <algorithm>

namespace gpt {

std::string rank_list(std::vector<int> ranks) {
  std::sort(ranks.begin(), ranks.end());
  ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
  std::string s = ranks.size() == 1 ? "rank " : "ranks ";
  for (size_t i = 0; i < ranks.size();) {
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    if (i > 0) s.append(", ");
    s.append(std::to_string(ranks[i]));
    if (j > i) s.append("-").append(std::to_string(ranks[j]));
    i = j + 1;
  }
  return s;
}

std::vector<std::string> error_lines(std::vector<ErrorReport> reports, int world_size) {
  std::stable_sort(reports.begin(), reports.end(),
                   [](const ErrorReport& a, const ErrorReport& b) { return a.rank < b.rank; });
  std::vector<std::string> lines;
  std::vector<bool> taken(reports.size(), false);
  for (size_t i = 0; i < reports.size(); ++i) {
    if (taken[i]) continue;
    std::vector<int> ranks;
    std::vector<std::string> hosts;
    bool same = true;
    for (size_t j = i; j < reports.size(); ++j) {
      if (taken[j] || reports[j].message != reports[i].message) continue;
      taken[j] = true;
      ranks.push_back(reports[j].rank);
      same = same && reports[j].same_on_all_ranks;
      if (std::find(hosts.begin(), hosts.end(), reports[j].host) == hosts.end()) hosts.push_back(reports[j].host);
    }
    std::string line = "error: " + reports[i].message;
    if (world_size > 1 && !same && int(ranks.size()) < world_size) {
      line += " (" + rank_list(ranks) + " on ";
      for (size_t h = 0; h < hosts.size() && h < 4; ++h) line += (h ? ", " : "") + hosts[h];
      if (hosts.size() > 4) line += ", ...";
      line += ")";
    }
    lines.push_back(line);
  }
  return lines;
}

}  // namespace gpt
