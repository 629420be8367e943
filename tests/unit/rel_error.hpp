// Normalised error ||got - want|| / ||want|| (L2), infinite if got has a
// NaN or Inf: the measure the emulated kernel tests compare with.
#pragma once

#include <cmath>
#include <vector>

namespace gpt::test {

inline double rel_error(const std::vector<float>& got, const std::vector<float>& want) {
  if (got.size() != want.size()) return INFINITY;
  double num = 0, den = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (!std::isfinite(got[i])) return INFINITY;
    num += double(got[i] - want[i]) * (got[i] - want[i]);
    den += double(want[i]) * want[i];
  }
  return std::sqrt(num / den);
}

}  // namespace gpt::test
