// TokenGroups (embedding.hpp): host code, kept out of embedding.cu so the
// CPU-emulated kernel tests can build the same groups the trainer uploads.
#include <algorithm>

#include "core/error.hpp"
#include "model/cuda/embedding.hpp"

namespace gpt::cuda {

void TokenGroups::build(const int32_t* tokens, int64_t n) {
  rows = n;
  int32_t lo = 0, hi = -1;
  for (int64_t k = 0; k < n; ++k) {
    lo = std::min(lo, tokens[k]);
    hi = std::max(hi, tokens[k]);
  }
  GPT_CHECK(lo >= 0, "token id {} is negative", lo);
  // Rows per token id, then the groups (ids present, ascending) and each
  // id's first slot in order; rows are placed in ascending row order, so
  // order is the stable sort by token.
  next_.assign(size_t(hi) + 1, 0);
  for (int64_t k = 0; k < n; ++k) ++next_[size_t(tokens[k])];
  int32_t groups = 0;
  for (const int32_t c : next_) groups += c > 0;
  num_groups = groups;
  packed.resize(size_t(n) + size_t(groups) * 2 + 1);
  int32_t* order = packed.data();
  int32_t* starts = order + n;
  int32_t* ids = starts + groups + 1;
  int32_t at = 0, u = 0;
  for (int32_t t = 0; t <= hi; ++t) {
    const int32_t c = next_[size_t(t)];
    if (c == 0) continue;
    starts[u] = at;
    ids[u] = t;
    ++u;
    next_[size_t(t)] = at;
    at += c;
  }
  starts[groups] = int32_t(n);
  for (int64_t k = 0; k < n; ++k) order[next_[size_t(tokens[k])]++] = int32_t(k);
}

}  // namespace gpt::cuda
