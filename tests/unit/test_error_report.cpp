// The lines a job prints for its ranks' errors (comm/error_report.hpp).
#include <gtest/gtest.h>

#include "comm/error_report.hpp"

namespace gpt {
namespace {

using Lines = std::vector<std::string>;

TEST(ErrorReport, RankListCollapsesRuns) {
  EXPECT_EQ(rank_list({3}), "rank 3");
  EXPECT_EQ(rank_list({2, 1, 0}), "ranks 0-2");
  EXPECT_EQ(rank_list({7, 0, 1, 2, 5, 8}), "ranks 0-2, 5, 7-8");
  EXPECT_EQ(rank_list({4, 6}), "ranks 4, 6");
  EXPECT_EQ(rank_list({1, 1, 2}), "ranks 1-2");
}

TEST(ErrorReport, EveryRankWithTheSameErrorIsOneLine) {
  std::vector<ErrorReport> r;
  for (int i = 3; i >= 0; --i) r.push_back({i, std::string{'n', char('0' + i / 2)}, "x.bin: truncated shard", false});
  EXPECT_EQ(error_lines(r, 4), (Lines{"error: x.bin: truncated shard"}));
}

TEST(ErrorReport, SomeRanksAreNamedWithTheirHosts) {
  const std::vector<ErrorReport> r = {{5, "node2", "missing", false}, {4, "node2", "missing", false},
                                      {7, "node3", "missing", false}};
  EXPECT_EQ(error_lines(r, 8), (Lines{"error: missing (ranks 4-5, 7 on node2, node3)"}));
  EXPECT_EQ(error_lines({{3, "vm", "out of memory", false}}, 4), (Lines{"error: out of memory (rank 3 on vm)"}));
}

TEST(ErrorReport, DistinctMessagesInRankOrder) {
  const std::vector<ErrorReport> r = {{2, "b", "B", false}, {0, "a", "A", false}, {1, "a", "B", false}};
  EXPECT_EQ(error_lines(r, 3), (Lines{"error: A (rank 0 on a)", "error: B (ranks 1-2 on a, b)"}));
}

TEST(ErrorReport, SameOnAllRanksNamesNoRanks) {
  // A config error is the job's, even if only some ranks reported it in time.
  EXPECT_EQ(error_lines({{0, "a", "invalid lr = -1", true}, {2, "a", "invalid lr = -1", true}}, 4),
            (Lines{"error: invalid lr = -1"}));
  // One rank alone names nothing either.
  EXPECT_EQ(error_lines({{0, "a", "bad", false}}, 1), (Lines{"error: bad"}));
}

TEST(ErrorReport, AtMostFourHosts) {
  std::vector<ErrorReport> r;
  for (int i = 0; i < 6; ++i) r.push_back({i, std::string{'h', char('0' + i)}, "gone", false});
  EXPECT_EQ(error_lines(r, 12), (Lines{"error: gone (ranks 0-5 on h0, h1, h2, h3, ...)"}));
}

}  // namespace
}  // namespace gpt
