// GPT-2 forward and backward on the CPU, unit by unit.
//
// The model owns activations and scratch, never parameters: each call takes
// the flat buffer of the unit it computes (and of its gradient), so whoever
// owns parameter storage (a strategy: replicated, sharded, gathered on
// demand) decides where those live. The model never communicates.
//
// Order of calls for one micro-batch:
//   forward_embedding, forward_block(0..L-1), forward_head   (loss; with
//   gradients the tied LM head's backward runs here too, see classifier.hpp)
//   backward_final, backward_block(L-1..0), backward_embedding.
// Parameter gradients accumulate (+=) into the given buffers.
//
// Templated on the scalar type: float for training, double for the
// finite-difference gradient check.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "core/memory.hpp"
#include "model/activations.hpp"
#include "model/attention_ds.hpp"
#include "model/layout.hpp"
#include "model/recompute.hpp"

namespace gpt {

struct GPTOptions {
  int max_batch = 1;  // micro-batch sequences
  int max_seq = 0;    // 0: the model's seq_len
  bool activation_checkpointing = false;  // keep only block inputs; recompute in backward
  int64_t classifier_chunk_rows = 0;      // 0: automatic (~32 MiB of logits)
  Recompute recompute = Recompute::kNone;  // see model/recompute.hpp; ignored with activation_checkpointing
  int gemm_autotune = 0;                   // cuda: cuda::Matmul::set_autotune; the CPU model ignores it
  // cuda, bf16: bytes for the attention backward's stored score gradients
  // (model/attention_ds.hpp; 0: dQ recomputed); the CPU model ignores it.
  int64_t attention_ds_budget = kAttentionDsDefaultBytes;
  // cuda, bf16: the attention forward on 128-query tiles (cuda::AttentionKernel::
  // kTensorCoreWide) instead of 64; an error where the tensor cores do not
  // apply. Off: bench_gpu_train's ours-wide-fwd row measures it against the
  // default before it becomes one. The CPU model and fp32 ignore it.
  bool attention_wide_forward = false;
  // cuda, bf16: cuDNN's fused attention (model/cuda/attention_cudnn.hpp) at
  // the largest shape (max_batch x max_seq, the training one; other shapes
  // take our kernels), with attention_ds_budget unused. The CPU model
  // ignores it.
  bool attention_cudnn = false;
  // Forward passes only (gpt_train --steps 0): one block's activations serve
  // every block (as with activation_checkpointing), and the backward's
  // working gradients are not allocated; forward_head with gradients and
  // the backward calls are errors (GPT_CHECK). Both models take it.
  bool forward_only = false;
};

// The largest shape, checked alike by GPT and cuda::DeviceGPT: max_seq 0
// becomes the model's seq_len; at least 1 x 1, at most seq_len positions.
void resolve_shape(GPTOptions& opt, const GPTConfig& c);
// set_decode's contract, checked alike by GPT and cuda::DeviceGPT: a
// position in [-1, max_seq), and a decoding pass (pos >= 0) of 1 sequence,
// its first tokens at pos 0 or 1 token later, inside max_seq.
void check_decode_position(int pos, int max_seq);
void check_decode_pass(int pos, int B, int T, int max_seq);
// Elements of the key/value cache: layer l, position t at (l * max_seq + t) * 2C.
inline int64_t decode_cache_elems(const GPTConfig& c, int max_seq) {
  return int64_t(c.n_layer) * max_seq * 2 * c.n_embd;
}

template <typename T>
class GPT {
 public:
  GPT(const ParamLayout& layout, const GPTOptions& opt, MemoryTracker* tracker);
  ~GPT();
  GPT(const GPT&) = delete;
  GPT& operator=(const GPT&) = delete;

  // Shape of the next pass: B <= max_batch sequences of Tn <= max_seq tokens.
  void set_shape(int B, int Tn);
  int batch() const { return B_; }
  int seq() const { return T_; }
  const ParamLayout& layout() const { return layout_; }

  void forward_embedding(const T* emb, const int32_t* tokens);
  void forward_block(int layer, const T* block);
  // Final LayerNorm, tied LM head, cross-entropy. Returns the mean loss over
  // the B*Tn rows. With emb_grad non-null it also runs the head's backward
  // (d ln_f output kept for backward_final, d wte accumulated into emb_grad)
  // with d(objective)/d(row loss) = loss_scale.
  double forward_head(const T* fin, const T* emb, const int32_t* targets, T* emb_grad, T loss_scale);

  // Per-position losses of the last forward_head, B*Tn in batch order.
  const T* row_losses() const { return losses_.data(); }

  void backward_final(const T* fin, T* fin_grad);
  void backward_block(int layer, const T* block, T* block_grad);
  void backward_embedding(const int32_t* tokens, T* emb_grad);

  // Sampling: logits[padded_vocab] of one row after forward_embedding and
  // forward_block(all) (columns >= vocab are -inf).
  void logits_row(const T* fin, const T* emb, int64_t row, T* out);

  // Incremental passes with a key/value cache, for sampling: a token costs
  // one position's work instead of a pass over the whole context.
  //   set_decode(0): the next passes (B = 1, Tn tokens) are positions
  //     [0, Tn), and store every layer's keys and values in the cache;
  //   set_decode(pos), pos > 0: the next pass (B = 1, Tn = 1) is the one
  //     token at position pos, attending to the cached [0, pos) and itself,
  //     which it stores at pos;
  //   set_decode(-1): whole passes again (training, validation).
  // The cache (L x max_seq x 2C, MemCategory::kScratch) is allocated on the
  // first call with pos >= 0. No backward of a decoding pass.
  void set_decode(int pos);

 private:
  using Acts = ActivationStore<Buffer<T>, Buffer<T>>;
  using BlockActs = typename Acts::Block;
  // Residual slot l of the current pass (model/activations.hpp).
  T* resid(int l) { return acts_.resid(l, int64_t(B_) * T_); }
  void block_forward(int layer, const T* p, BlockActs& a, const T* x, T* out);
  void final_ln(const T* fin);

  const ParamLayout& layout_;
  GPTOptions opt_;
  MemoryTracker* tracker_ = nullptr;
  int B_ = 0, T_ = 0;
  int decode_pos_ = -1;  // set_decode's position; -1: whole passes
  int scratch_threads_ = 1;
  int64_t chunk_rows_ = 0;
  Acts acts_;  // what the blocks save for backward, and the residual stream
  Buffer<T> lnf_, lnf_mean_, lnf_rstd_, dlnf_, losses_, logits_;
  Buffer<T> dresid_, dbig_, dqkv_, dsmall_, att_scratch_;
  Buffer<T> kv_;  // set_decode's cache: layer l, position t at (l * max_seq + t) * 2C: keys | values
};

// Convenience for tests and single-rank tools: params/grads hold one pointer
// per unit (layout order). grads empty = forward only. Returns mean loss.
template <typename T>
double forward_backward(GPT<T>& m, const std::vector<const T*>& params, const std::vector<T*>& grads,
                        const int32_t* tokens, const int32_t* targets, T loss_scale);

}  // namespace gpt
