// LM head tied to wte, fused with softmax cross-entropy.
//
// Rows are processed in chunks: logits for a chunk are computed, turned into
// losses, then overwritten in place by their gradient, which is immediately
// pushed through the head's two GEMMs. So logits exist for one chunk at a
// time, never for the whole batch, and no separate probabilities buffer is
// made. The head's backward therefore runs inside the forward pass when
// gradients are requested (as llm.c does).
//
// The GEMM runs over padded_vocab columns (aligned rows); columns >= vocab
// are excluded from the max, the normaliser and the loss, and get zero
// gradient, so wte's padded rows never change.
#pragma once

#include <cstdint>

namespace gpt::cpu {

struct ClassifierShape {
  int64_t N;   // rows (B * T)
  int64_t C;   // width
  int64_t V;   // real vocabulary
  int64_t Vp;  // padded vocabulary (rows of wte)
};

template <typename T>
struct ClassifierArgs {
  const T* inp = nullptr;            // [N, C] final LayerNorm output
  const T* wte = nullptr;            // [Vp, C]
  const int32_t* targets = nullptr;  // [N], each in [0, V)
  T* losses = nullptr;               // [N] per-row cross-entropy (out)
  T* logits = nullptr;               // scratch [chunk_rows, Vp]
  int64_t chunk_rows = 0;
  // Gradient outputs; both null for evaluation. dinp[N, C] is overwritten,
  // dwte[Vp, C] accumulated. loss_scale is d(objective)/d(row loss), e.g.
  // 1 / (rows in the global batch).
  T* dinp = nullptr;
  T* dwte = nullptr;
  T loss_scale = 0;
};

template <typename T>
void classifier_forward_backward(const ClassifierArgs<T>& a, const ClassifierShape& s);

// logits[Vp] for one row (sampling). Columns >= V are set to -inf.
template <typename T>
void classifier_logits_row(T* logits, const T* inp_row, const T* wte, const ClassifierShape& s);

}  // namespace gpt::cpu
