// Causal multi-head self-attention core (the part between c_attn and c_proj).
// qkv[B, T, 3C] holds q | k | v, head h at columns [h*hs, (h+1)*hs) of each.
// Scores are scaled by 1/sqrt(hs). The probabilities att[B, NH, T, T] are
// saved for backward (rows are zero above the diagonal).
#pragma once

#include <cstdint>

namespace gpt::cpu {

struct AttentionShape {
  int64_t B, T, C, NH;
};

// out[B, T, C] = softmax(mask(q k^T / sqrt(hs))) v, per head.
template <typename T>
void attention_forward(T* out, T* att, const T* qkv, const AttentionShape& s);

// One new position of an incremental (KV-cached) pass, for sampling:
// out[C] = softmax(q k^T / sqrt(hs)) v per head over P cached positions,
// the new one included (it is the newest: nothing to mask).
// q[C]: the new position's queries; kv[P, 2C]: keys then values of
// positions [0, P), as qkv's k | v columns; scores: NH * P elements.
template <typename T>
void attention_decode(T* out, T* scores, const T* q, const T* kv, int64_t P, int64_t C, int64_t NH);

// Elements of scratch that attention_backward needs per thread.
inline int64_t attention_scratch_per_thread(int64_t T) { return T * T; }

// dqkv[B, T, 3C] = gradient wrt qkv (overwritten) given dout[B, T, C].
// scratch: attention_scratch_per_thread(T) * scratch_threads elements; the
// call checks that OpenMP will not use more threads than that.
template <typename T>
void attention_backward(T* dqkv, const T* dout, const T* qkv, const T* att, T* scratch, int scratch_threads,
                        const AttentionShape& s);

}  // namespace gpt::cpu
