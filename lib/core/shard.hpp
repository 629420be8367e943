// Shard arithmetic, in exactly one place (every strategy and collective
// test uses it). A buffer of `numel` elements split over `parts` ranks is
// first padded to a multiple of `parts`; shard r is the r-th of the equal
// contiguous pieces of the padded buffer. The padding is never part of the
// math: `valid_end` marks where real elements stop inside the shard.
#pragma once

#include <algorithm>
#include <cstdint>

namespace gpt {

struct ShardRange {
  int64_t begin = 0;      // first element (in the padded buffer)
  int64_t end = 0;        // one past the last element (in the padded buffer)
  int64_t valid_end = 0;  // min(end, numel): [begin, valid_end) are real elements
  int64_t shard_numel = 0;   // end - begin, the same on every rank
  int64_t padded_numel = 0;  // shard_numel * parts
  int64_t valid() const { return std::max<int64_t>(0, valid_end - begin); }
};

// Shard `rank` of `numel` elements over `parts` ranks. Requires parts >= 1
// and 0 <= rank < parts; numel may be 0.
constexpr ShardRange shard_range(int64_t numel, int parts, int rank) {
  ShardRange s;
  s.shard_numel = (numel + parts - 1) / parts;
  s.padded_numel = s.shard_numel * parts;
  s.begin = s.shard_numel * rank;
  s.end = s.begin + s.shard_numel;
  s.valid_end = std::min(s.end, numel);
  if (s.valid_end < s.begin) s.valid_end = s.begin;
  return s;
}

}  // namespace gpt
