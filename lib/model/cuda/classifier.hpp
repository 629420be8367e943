// LM head tied to wte fused with softmax cross-entropy, on the device
// (contract: model/cpu/classifier.hpp). Logits exist for one chunk of rows
// at a time; one kernel per chunk turns them into the per-row loss and, in
// place, into their gradient (softmax - one-hot) * loss_scale, which the two
// backward GEMMs consume at once: no probabilities buffer, no full [N, Vp]
// logits. Softmax statistics and losses are fp32.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "model/cuda/matmul.hpp"
#include "model/cuda/types.hpp"

namespace gpt::cuda {

struct ClassifierShape {
  int64_t N, C, V, Vp;
};

template <typename T>
struct ClassifierArgs {
  const T* inp = nullptr;            // [N, C]
  const T* wte = nullptr;            // [Vp, C]
  const int32_t* targets = nullptr;  // [N] on the device, each in [0, V)
  float* losses = nullptr;           // [N] per-row cross-entropy (out)
  T* logits = nullptr;               // scratch [chunk_rows, Vp]
  int64_t chunk_rows = 0;
  T* dinp = nullptr;  // [N, C] overwritten; null for evaluation
  T* dwte = nullptr;  // [Vp, C] accumulated
  float loss_scale = 0.f;
};

template <typename T>
void classifier_forward_backward(Matmul& mm, const ClassifierArgs<T>& a, const ClassifierShape& s,
                                 cudaStream_t stream);

// logits[Vp] (device) of one row; columns >= V set to -inf.
template <typename T>
void classifier_logits_row(Matmul& mm, T* logits, const T* inp_row, const T* wte, const ClassifierShape& s,
                           cudaStream_t stream);

}  // namespace gpt::cuda
