// TokenGroups (embedding.hpp): host code, kept out of embedding.cu so the
// CPU-emulated kernel tests can build the same groups the trainer uploads.
#include <algorithm>
#include <numeric>

#include "model/cuda/embedding.hpp"

namespace gpt::cuda {

void TokenGroups::build(const int32_t* tokens, int64_t n) {
  rows = n;
  packed.resize(size_t(3 * n + 1));
  int32_t* order = packed.data();
  std::iota(order, order + n, 0);
  std::stable_sort(order, order + n, [&](int32_t a, int32_t b) { return tokens[a] < tokens[b]; });
  // Group boundaries into a temporary tail, then compact starts | token.
  std::vector<int32_t> starts, ids;
  starts.reserve(size_t(n) + 1);
  ids.reserve(size_t(n));
  for (int64_t k = 0; k < n; ++k) {
    if (k == 0 || tokens[order[k]] != tokens[order[k - 1]]) {
      starts.push_back(int32_t(k));
      ids.push_back(tokens[order[k]]);
    }
  }
  starts.push_back(int32_t(n));
  num_groups = int32_t(ids.size());
  std::copy(starts.begin(), starts.end(), packed.begin() + n);
  std::copy(ids.begin(), ids.end(), packed.begin() + n + int64_t(starts.size()));
  packed.resize(size_t(n + int64_t(starts.size()) + int64_t(ids.size())));
}

}  // namespace gpt::cuda
