#include "core/closest_name.hpp"

#include <algorithm>

namespace gpt {

int edit_distance(std::string_view a, std::string_view b) {
  const size_t n = a.size(), m = b.size();
  // d[i][j]: edits from a's first i characters to b's first j; three rows suffice for the swap.
  std::vector<int> prev2(m + 1), prev(m + 1), cur(m + 1);
  for (size_t j = 0; j <= m; ++j) prev[j] = int(j);
  for (size_t i = 1; i <= n; ++i) {
    cur[0] = int(i);
    for (size_t j = 1; j <= m; ++j) {
      const int sub = prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1);
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, sub});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) cur[j] = std::min(cur[j], prev2[j - 2] + 1);
    }
    std::swap(prev2, prev);
    std::swap(prev, cur);
  }
  return prev[m];
}

std::string closest_name(std::string_view word, const std::vector<std::string>& candidates) {
  std::string best;
  int best_d = 3;  // more than the 2 edits a typo may have
  bool tie = false;
  for (const std::string& c : candidates) {
    const int d = edit_distance(word, c);
    if (d == 0 || 3 * d >= int(std::max(word.size(), c.size()))) continue;
    if (d < best_d) {
      best = c;
      best_d = d;
      tie = false;
    } else if (d == best_d && c != best) {
      tie = true;
    }
  }
  return tie ? "" : best;
}

std::string did_you_mean(std::string_view word, const std::vector<std::string>& candidates, std::string_view prefix) {
  const std::string c = closest_name(word, candidates);
  return c.empty() ? "" : " (did you mean " + std::string(prefix) + c + "?)";
}

std::string unknown_argument(std::string_view arg, const std::vector<std::string>& flags) {
  if (arg.size() < 2 || arg[0] != '-') return "command line: unexpected argument '" + std::string(arg) + "'";
  const std::string_view flag = arg.substr(0, arg.find('='));
  const std::string_view name = flag.substr(flag.find_first_not_of('-'));
  return "command line: unknown flag " + std::string(flag) + did_you_mean(name, flags, "--");
}

}  // namespace gpt
