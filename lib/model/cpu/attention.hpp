// Causal multi-head self-attention core (the part between c_attn and c_proj).
// qkv[B, T, 3C] holds q | k | v, head h at columns [h*hs, (h+1)*hs) of each.
// Scores are scaled by 1/sqrt(hs).
//
// Flash-style, like the CUDA kernels: forward saves only the log-sum-exp of
// each query row's scaled scores, lse[B, NH, T]; backward recomputes the
// probabilities exp(s_ij - lse_i) from q and k. The T x T probabilities
// are never stored for backward: they were half of gpt2-124m's CPU
// activations at T = 1024. Both passes walk a head kAttentionQueryRows queries at a
// time, so a block's scores against every key it sees (kAttentionQueryRows x T) stay
// in the thread's cache instead of streaming a T x T matrix through memory;
// measured, that made both passes faster, not slower (README, Performance).
#pragma once

#include <algorithm>
#include <cstdint>

namespace gpt::cpu {

struct AttentionShape {
  int64_t B, T, C, NH;
};

// Query rows per block.
inline constexpr int64_t kAttentionQueryRows = 64;

// Elements of scratch per OpenMP thread: a block's scores and, in backward,
// their gradient; rounded up to 16 elements (a 64-byte line of floats) so that, in a 64-byte
// aligned buffer, every thread's part is aligned alike. Eigen's vectorised
// row reductions round differently at another alignment, and with equal
// alignment a head's result does not depend on which thread computed it.
inline int64_t attention_scratch_per_thread(int64_t T) {
  return (2 * std::min(kAttentionQueryRows, T) * T + 15) / 16 * 16;
}

// Elements of one scratch buffer that serves attention_forward and
// attention_backward on `threads` threads, and attention_decode's scores
// over up to T cached positions.
inline int64_t attention_scratch(int64_t T, int64_t NH, int threads) {
  return std::max(attention_scratch_per_thread(T) * threads, NH * T);
}

// out[B, T, C] = softmax(mask(q k^T / sqrt(hs))) v, per head, and
// lse[B, NH, T] = log sum_j exp(q_i . k_j / sqrt(hs)) over j <= i.
// scratch: attention_scratch_per_thread(T) * scratch_threads elements; the
// call checks that OpenMP will not use more threads than that.
template <typename T>
void attention_forward(T* out, T* lse, const T* qkv, T* scratch, int scratch_threads, const AttentionShape& s);

// One new position of an incremental (KV-cached) pass, for sampling:
// out[C] = softmax(q k^T / sqrt(hs)) v per head over P cached positions,
// the new one included (it is the newest: nothing to mask).
// q[C]: the new position's queries; kv[P, 2C]: keys then values of
// positions [0, P), as qkv's k | v columns; scores: NH * P elements.
template <typename T>
void attention_decode(T* out, T* scores, const T* q, const T* kv, int64_t P, int64_t C, int64_t NH);

// dqkv[B, T, 3C] = gradient wrt qkv (overwritten) given dout[B, T, C] and
// forward's lse. Scratch as attention_forward's.
template <typename T>
void attention_backward(T* dqkv, const T* dout, const T* qkv, const T* lse, T* scratch, int scratch_threads,
                        const AttentionShape& s);

}  // namespace gpt::cpu
