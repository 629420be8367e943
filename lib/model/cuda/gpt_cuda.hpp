// GPT-2 forward and backward on one GPU, unit by unit: the device twin of
// model/gpt.hpp, with the same ownership rules (the model owns activations
// and scratch, never parameters; each call takes the unit's flat buffer and
// gradient, device pointers of type T) and the same call order:
//   set_batch, forward_embedding, forward_block(0..L-1), forward_head,
//   backward_final, backward_block(L-1..0), backward_embedding.
// Parameter gradients accumulate (+=) into the given buffers.
//
// Everything is enqueued on one stream; nothing here synchronises the host
// except take_loss() (once per optimizer step, and once per validation) and
// set_batch()'s reuse of its pinned staging buffer (which waits for the
// previous upload: in training long done, in a validation the last batch's).
//
// T = float (fp32, checked against the CPU model to 1e-4) or bf16 (mixed
// precision: bf16 activations and parameters, fp32 LayerNorm statistics,
// softmax, attention arithmetic and loss).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "core/cuda/device_memory.hpp"
#include "model/cuda/embedding.hpp"
#include "model/cuda/matmul.hpp"
#include "model/cuda/types.hpp"
#include "model/activations.hpp"
#include "model/gpt.hpp"
#include "model/layout.hpp"

namespace gpt::cuda {

// Rows of the LM head's logits that exist at a time when GPTOptions leaves
// classifier_chunk_rows at 0: 256 MiB of logits (whole multiples of 128
// rows, at least 128), so the head's GEMMs are large enough to keep the
// tensor cores busy while the whole [N, Vp] (1.6 GB in bf16 at B=16,
// T=1024) never exists. bench_gpu_gemm times the head at this shape.
int64_t default_chunk_rows(int64_t Vp, size_t elem_bytes);

template <typename T>
class DeviceGPT {
 public:
  // Activations come from `alloc` (category activations); GEMMs run on `mm`.
  DeviceGPT(const ParamLayout& layout, const GPTOptions& opt, DeviceAllocator* alloc, Matmul* mm,
            cudaStream_t stream);
  ~DeviceGPT();
  DeviceGPT(const DeviceGPT&) = delete;
  DeviceGPT& operator=(const DeviceGPT&) = delete;

  void set_shape(int B, int Tn);
  int batch() const { return B_; }
  int seq() const { return T_; }
  const ParamLayout& layout() const { return layout_; }
  cudaStream_t stream() const { return stream_; }

  // Host tokens and targets of the next micro-batch ([B*T] each); uploaded
  // asynchronously together with the token groups of the embedding backward.
  void set_batch(const int32_t* tokens, const int32_t* targets);

  void forward_embedding(const T* emb);
  void forward_block(int layer, const T* block);
  // Final LayerNorm, tied LM head, cross-entropy; the rows' summed loss is
  // added to a device accumulator (take_loss). With emb_grad non-null the
  // head's backward runs here too (see model/cpu/classifier.hpp).
  void forward_head(const T* fin, const T* emb, T* emb_grad, float loss_scale);
  void backward_final(const T* fin, T* fin_grad);
  void backward_block(int layer, const T* block, T* block_grad);
  void backward_embedding(T* emb_grad);

  // Mean loss over the rows of every forward_head since the last call.
  // Synchronises the stream.
  double take_loss();
  // The last forward_head's per-position losses (B*T floats) copied into
  // pinned host slot `slot` (0 or 1), queued on the stream; row_losses_ready
  // waits for that copy (bounded) and returns the slot. The slots (2 x
  // max_batch x max_seq floats) are allocated on first use.
  void copy_row_losses(int slot);
  const float* row_losses_ready(int slot);

  // Host logits[padded_vocab] of one row after a forward (sampling).
  void logits_row(const T* fin, const T* emb, int64_t row, float* out);

  // Incremental passes with a key/value cache, GPT::set_decode's contract:
  // pos = 0 starts one (the next pass is 1 sequence of its first tokens),
  // pos > 0 makes the next pass the 1 token at position pos, attending to the
  // cached [0, pos) and itself; -1 returns to whole passes. The cache (L x
  // max_seq x 2C, scratch) is allocated on first use. Returns false, and
  // stays with whole passes, where the decoding kernel does not apply
  // (max_seq above attention_decode_max_positions()).
  bool set_decode(int pos);

 private:
  using Acts = ActivationStore<DeviceBuffer<T>, DeviceBuffer<float>>;
  using BlockActs = typename Acts::Block;
  // Residual slot l of the current pass (model/activations.hpp).
  T* resid(int l) { return acts_.resid(l, int64_t(B_) * T_); }
  void block_forward(int layer, const T* p, BlockActs& a, const T* x, T* out);
  void final_ln(const T* fin);

  const ParamLayout& layout_;
  GPTOptions opt_;
  DeviceAllocator* alloc_;
  Matmul* mm_;
  cudaStream_t stream_;
  int B_ = 0, T_ = 0;
  int64_t chunk_rows_ = 0, rows_in_loss_ = 0;
  Acts acts_;  // what the blocks save for backward, and the residual stream
  DeviceBuffer<T> lnf_, dlnf_, logits_, dresid_, dbig_, dqkv_, dsmall_;
  DeviceBuffer<float> lnf_mean_, lnf_rstd_, losses_, ln_scratch_, att_scratch_;
  // GPTOptions::attention_cudnn: cuDNN's attention workspace (empty: our kernels).
  DeviceBuffer<float> cudnn_ws_;
  bool use_cudnn() const { return cudnn_ws_.size() > 0 && B_ == opt_.max_batch && T_ == opt_.max_seq; }
  DeviceBuffer<float> row_logits_;  // logits_row's fp32 copy; allocated on first use (sampling only)
  DeviceBuffer<T> kv_;              // set_decode's key/value cache; allocated on first use (sampling only)
  int decode_pos_ = -1;             // -1: whole passes
  DeviceBuffer<double> loss_sum_, sum_scratch_;
  DeviceBuffer<int32_t> batch_;  // tokens [N] | targets [N] | token groups
  TokenGroups groups_;
  int32_t* staging_ = nullptr;  // pinned host copy of batch_
  size_t staging_elems_ = 0;
  cudaEvent_t uploaded_ = nullptr;
  float* row_slots_ = nullptr;                      // copy_row_losses' pinned slots, 2 x max_batch x max_seq
  cudaEvent_t row_copied_[2] = {nullptr, nullptr};  // each slot's copy
};

}  // namespace gpt::cuda
