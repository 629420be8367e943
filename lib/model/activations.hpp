// Where a GPT keeps what its blocks save for their backward: the placement
// rules of --recompute (model/recompute.hpp) and --activation-checkpointing,
// written once for the CPU model (model/gpt.hpp: Buffer) and the CUDA one
// (model/cuda/gpt_cuda.hpp: DeviceBuffer). The planner's memory model
// (strategies/cost_model.cpp) counts the same buffers.
#pragma once

#include <cstdint>
#include <memory>
#include <type_traits>
#include <utility>
#include <vector>

#include "core/memory.hpp"
#include "model/recompute.hpp"

namespace gpt {

// Everything one block saves for its backward, for N rows of C columns and
// NH heads. Buf holds activations of the model's type; Stat the LayerNorm
// statistics and attention's log-sum-exp per row and head (the CPU model
// keeps them in its type, the CUDA model in fp32): attention keeps only
// that, not the T x T probabilities. With --recompute the
// LayerNorm (gelu-ln) and GELU outputs are not among them: those buffers
// stay empty (ActivationStore::ln1 etc. say where the outputs are).
template <typename Buf, typename Stat>
struct BlockActivations {
  Buf ln1, qkv, atty, res2, ln2, fch, fch_gelu;
  Stat ln1_mean, ln1_rstd, ln2_mean, ln2_rstd, lse;
  // source: what Buf and Stat allocate from (a MemoryTracker, a DeviceAllocator).
  template <typename Source>
  BlockActivations(int64_t N, int64_t C, int64_t NH, Recompute r, Source* source) {
    const auto A = MemCategory::kActivations;
    if (!recomputes_ln(r)) {
      ln1 = Buf(N * C, A, source);
      ln2 = Buf(N * C, A, source);
    }
    qkv = Buf(N * 3 * C, A, source);
    atty = Buf(N * C, A, source);
    res2 = Buf(N * C, A, source);
    fch = Buf(N * 4 * C, A, source);
    if (!recomputes_gelu(r)) fch_gelu = Buf(N * 4 * C, A, source);
    ln1_mean = Stat(N, A, source);
    ln1_rstd = Stat(N, A, source);
    ln2_mean = Stat(N, A, source);
    ln2_rstd = Stat(N, A, source);
    lse = Stat(N * NH, A, source);
  }
};

// The saved activations of a model of L layers for up to N rows: the
// residual stream (L + 1 slots of N x C: the block inputs and the last
// block's output), one BlockActivations per layer, or one that every layer
// reuses with activation checkpointing (which keeps only the block inputs
// and recomputes a whole block before its backward, so --recompute is moot
// there and ignored), and with --recompute the one LayerNorm-output (N x C)
// and GELU-output (N x 4C) buffer that all blocks write in turn.
template <typename Buf, typename Stat>
class ActivationStore {
 public:
  using Block = BlockActivations<Buf, Stat>;
  using Elem = std::remove_pointer_t<decltype(std::declval<Buf&>().data())>;

  ActivationStore() = default;
  template <typename Source>
  ActivationStore(int L, int64_t N, int64_t C, int64_t NH, Recompute r, bool checkpointing, Source* source)
      : C_(C), recompute_(checkpointing ? Recompute::kNone : r), checkpointing_(checkpointing) {
    for (int i = 0; i < (checkpointing ? 1 : L); ++i)
      blocks_.push_back(std::make_unique<Block>(N, C, NH, recompute_, source));
    const auto A = MemCategory::kActivations;
    if (recomputes_ln(recompute_)) shared_ln_ = Buf(N * C, A, source);
    if (recomputes_gelu(recompute_)) shared_gelu_ = Buf(N * 4 * C, A, source);
    resid_ = Buf((L + 1) * N * C, A, source);
  }

  // What is in effect: kNone with activation checkpointing.
  Recompute recompute() const { return recompute_; }
  // Residual slot l (the input of block l; l = L: the last block's output)
  // for a pass of `rows` rows.
  Elem* resid(int l, int64_t rows) { return resid_.data() + int64_t(l) * rows * C_; }
  // Block l's saved activations.
  Block& block(int l) { return *blocks_[checkpointing_ ? 0 : l]; }
  // Where block a's LayerNorm and GELU outputs live: its own buffers, or
  // with --recompute the buffers shared by all blocks.
  Elem* ln1(Block& a) { return recomputes_ln(recompute_) ? shared_ln_.data() : a.ln1.data(); }
  Elem* ln2(Block& a) { return recomputes_ln(recompute_) ? shared_ln_.data() : a.ln2.data(); }
  Elem* gelu(Block& a) { return recomputes_gelu(recompute_) ? shared_gelu_.data() : a.fch_gelu.data(); }

 private:
  int64_t C_ = 0;
  Recompute recompute_ = Recompute::kNone;
  bool checkpointing_ = false;
  std::vector<std::unique_ptr<Block>> blocks_;
  Buf resid_, shared_ln_, shared_gelu_;
};

}  // namespace gpt
