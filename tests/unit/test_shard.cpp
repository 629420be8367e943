#include <gtest/gtest.h>

#include <vector>

#include "core/shard.hpp"

namespace gpt {
namespace {

TEST(ShardRange, TilesThePaddedBufferAndCoversEveryElementOnce) {
  for (int64_t numel : {0, 1, 7, 64, 1000, 12345}) {
    for (int parts : {1, 2, 3, 4, 7, 8}) {
      std::vector<int> owner(numel, -1);
      int64_t next = 0, shard = -1;
      for (int r = 0; r < parts; ++r) {
        const ShardRange s = shard_range(numel, parts, r);
        if (shard < 0) shard = s.shard_numel;
        ASSERT_EQ(s.shard_numel, shard) << "equal shards";
        ASSERT_EQ(s.begin, next);
        ASSERT_EQ(s.end - s.begin, s.shard_numel);
        ASSERT_EQ(s.padded_numel, s.shard_numel * parts);
        ASSERT_LT(s.padded_numel - numel, parts) << "padding is less than one element per part";
        for (int64_t i = s.begin; i < s.valid_end; ++i) {
          ASSERT_EQ(owner[i], -1);
          owner[i] = r;
        }
        EXPECT_EQ(s.valid(), s.valid_end - s.begin);
        next = s.end;
      }
      for (int64_t i = 0; i < numel; ++i) ASSERT_GE(owner[i], 0) << numel << "/" << parts << " element " << i;
    }
  }
  // 10 over 4: shards of 3, the last holds 1 real element and 2 of padding.
  const ShardRange last = shard_range(10, 4, 3);
  EXPECT_EQ(last.begin, 9);
  EXPECT_EQ(last.valid(), 1);
  EXPECT_EQ(shard_range(2, 4, 3).valid(), 0);
}

}  // namespace
}  // namespace gpt

#include "comm/bootstrap.hpp"
#include "core/error.hpp"

namespace gpt {
namespace {

// Ranks sharing a GPU are refused where the trainer finds its GPU (by
// UUID): emulated.train_strategies runs --comm nccl on 2 ranks sharing one.
TEST(Bootstrap, GpuByLocalRank) {
  EXPECT_EQ(pick_gpu(3, 8), 3);
  EXPECT_EQ(pick_gpu(5, 4), 1);
  EXPECT_EQ(pick_gpu(5, 1), 0);  // one visible GPU per rank: its own
  EXPECT_THROW(pick_gpu(0, 0), ConfigError);
}

}  // namespace
}  // namespace gpt
