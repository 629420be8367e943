#include "model/attention_ds.hpp"

#include <fmt/format.h>

#include "core/bytes.hpp"

namespace gpt {

std::string describe_attention_ds(int64_t B, int64_t T, int64_t NH, int64_t budget) {
  if (budget <= 0) return "attention backward: dQ recomputed (--attention-ds-mib 0)";
  const int64_t total = B * NH, bytes = attention_ds_bytes(B, T, NH, budget);
  const std::string all = format_bytes(double(total * attention_ds_bytes_per_pair(T)));
  if (bytes == 0)
    return fmt::format(
        "attention backward: dQ recomputed: --attention-ds-mib {} holds the score gradients of {} of the {} (batch, "
        "head) pairs, under the {} blocks a launch needs to fill a GPU ({} would hold them all)",
        budget >> 20, attention_ds_pairs_fit(B, T, NH, budget), total, kAttentionDsMinBlocks, all);
  const AttentionDsLaunches l = attention_ds_launches(total, attention_ds_pairs_fit(B, T, NH, bytes));
  if (l.count == 1)
    return fmt::format("attention backward: dQ from the stored score gradients, {} for all {} (batch, head) pairs",
                       format_bytes(double(bytes)), total);
  return fmt::format("attention backward: dQ from the stored score gradients in {} launches of {} (batch, head) pairs, "
                     "{} ({} would hold all {} at once)",
                     l.count, l.pairs, format_bytes(double(bytes)), all, total);
}

}  // namespace gpt
