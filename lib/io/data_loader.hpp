// Distributed loader over llm.c token shards.
//
// The data is cut into windows of seq_len+1 tokens (inputs and shifted
// targets) starting every seq_len tokens of each shard. An epoch visits the
// windows in an order shuffled by (seed, epoch) — the same on every rank —
// and each optimizer step consumes global_batch consecutive windows of that
// order. Rank r owns windows [r*G/W, (r+1)*G/W) of each global batch and
// micro-batch m of it the m-th group of micro_batch windows. An epoch ends
// when fewer than global_batch windows remain (the remainder is skipped).
// The position (epoch, window offset) is all a resume needs.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "io/token_shard.hpp"

namespace gpt {

struct LoaderOptions {
  std::vector<std::string> files;  // shard paths (already expanded)
  int seq_len = 0;
  int global_batch = 0;  // sequences per optimizer step over all ranks
  int micro_batch = 0;   // sequences per forward/backward on one rank
  int rank = 0;
  int world = 1;
  uint64_t seed = 0;
  bool shuffle = true;
  // Every window read is checked against it too (0: not checked), as the
  // start-up check of the whole data (scan_tokens) is split among ranks
  // that may not read the same bytes: a node's damaged copy.
  int vocab_size = 0;
};

struct LoaderPosition {
  int64_t epoch = 0;
  int64_t offset = 0;  // windows of this epoch already consumed (all ranks)
  bool operator==(const LoaderPosition&) const = default;
};

// Micro-batches per optimizer step: global_batch / (world x micro_batch).
// Throws ConfigError when global_batch is not a positive multiple of
// micro_batch x world; `source` (a config file), when given, is named in it.
int accum_steps(int global_batch, int micro_batch, int world, const std::string& source = {});

class DataLoader {
 public:
  // Throws DataError for unreadable/invalid shards or too little data, and
  // ConfigError when the batch sizes do not divide. Opening reads the
  // shards' headers only: scan_tokens checks the tokens, and micro_batch and
  // tail the windows they read (LoaderOptions::vocab_size).
  explicit DataLoader(LoaderOptions opt);

  // Part `part` of `parts` of the data (every shard's tokens in order, cut
  // into `parts` runs of nearly equal length) scanned: its largest id, and
  // its first token >= vocab_size as a one-line DataError message naming
  // the shard, the position in it and the id ("" when there is none). The
  // parts cover every token once, in order: the lowest part with an error
  // has the data's first bad token. A job's ranks each scan their own part
  // and agree (the trainer), so the data are read once per job at
  // start-up, not once per rank. Notes progress per shard (the caller's
  // StallGuard).
  TokenShard::Scan scan_tokens(int vocab_size, int part = 0, int parts = 1) const;

  int accum_steps() const { return accum_; }
  int64_t num_windows() const { return total_windows_; }
  int64_t num_tokens() const { return total_tokens_; }
  // Optimizer steps an epoch holds: its whole global batches.
  int64_t steps_per_epoch() const { return total_windows_ / opt_.global_batch; }
  // The shards, in the order their windows are numbered.
  const std::vector<TokenShard>& shards() const { return shards_; }
  // Fills tokens and targets [micro_batch * seq_len] for micro-batch m of
  // the current step on this rank.
  void micro_batch(int m, int32_t* tokens, int32_t* targets) const;
  // The windows after the epoch's last whole global batch (fewer than
  // global_batch; none when it divides num_windows()), as this rank's
  // stripe of a batch would hold them: this rank's rows of that partial
  // batch into tokens and targets [micro_batch * seq_len], their count
  // returned (0 to micro_batch). One micro-batch per step only (accum 1:
  // validation's loader). A validation of all the data reads it last.
  int tail(int32_t* tokens, int32_t* targets) const;
  // All ranks' rows of that partial batch together.
  int64_t tail_windows() const { return total_windows_ % opt_.global_batch; }
  // Moves to the next optimizer step.
  void advance();
  LoaderPosition position() const { return pos_; }
  void seek(const LoaderPosition& p);

 private:
  int64_t window_at(int64_t order_index) const;
  // Windows [first, first + count) of the epoch's order into tokens and targets.
  void read_windows(int64_t first, int count, int32_t* tokens, int32_t* targets) const;
  void build_order();

  LoaderOptions opt_;
  std::vector<TokenShard> shards_;
  std::vector<int64_t> first_window_;  // prefix sums of windows per shard
  // The permutation of this epoch (empty: identity), 4 bytes a window: a
  // 100B-token data set at T=1024 holds 98M windows (390 MB a rank, where
  // 8-byte entries took 780 MB and twice the shuffle's memory traffic).
  std::vector<uint32_t> order_;
  int64_t total_windows_ = 0, total_tokens_ = 0;
  int accum_ = 1;
  LoaderPosition pos_;
};

// Expands a comma-separated list of glob patterns into sorted file paths.
// Throws DataError naming the pattern when one matches nothing.
std::vector<std::string> expand_globs(const std::string& patterns);

}  // namespace gpt
