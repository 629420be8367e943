#include "model/cuda/gpt_cuda.hpp"

#include <algorithm>
#include <cstring>
#include <type_traits>

#include "core/cuda/host_wait.hpp"
#include "core/error.hpp"
#include "model/cuda/attention.hpp"
#include "model/cuda/attention_cudnn.hpp"
#include "model/cuda/check.hpp"
#include "model/cuda/classifier.hpp"
#include "model/cuda/elementwise.hpp"
#include "model/cuda/gelu.hpp"
#include "model/cuda/layernorm.hpp"

namespace gpt::cuda {

int64_t default_chunk_rows(int64_t Vp, size_t elem_bytes) {
  return std::max<int64_t>(128, (int64_t(256) << 20) / (Vp * int64_t(elem_bytes)) / 128 * 128);
}

template <typename T>
DeviceGPT<T>::DeviceGPT(const ParamLayout& layout, const GPTOptions& opt, DeviceAllocator* alloc, Matmul* mm,
                        cudaStream_t stream)
    : layout_(layout), opt_(opt), alloc_(alloc), mm_(mm), stream_(stream) {
  const GPTConfig& c = layout.config();
  resolve_shape(opt_, c);
  if (!attention_supported(c.n_embd / c.n_head))
    throw ConfigError(fmt::format(
        "invalid model for --device cuda: head size n_embd / n_head = {} (supported: {})", c.n_embd / c.n_head,
        attention_head_sizes()));
  const int64_t N = int64_t(opt_.max_batch) * opt_.max_seq, C = c.n_embd, Vp = c.padded_vocab();
  acts_ = Acts(c.n_layer, N, C, c.n_head, opt_.recompute, opt_.activation_checkpointing || opt_.forward_only, alloc);
  const auto A = MemCategory::kActivations;
  lnf_ = DeviceBuffer<T>(N * C, A, alloc);
  lnf_mean_ = DeviceBuffer<float>(N, A, alloc);
  lnf_rstd_ = DeviceBuffer<float>(N, A, alloc);
  const int64_t NG = opt_.forward_only ? 0 : N;  // rows of the backward's working gradients
  dlnf_ = DeviceBuffer<T>(NG * C, A, alloc);
  losses_ = DeviceBuffer<float>(N, A, alloc);
  // Logits chunk: 256 MiB by default (default_chunk_rows; the CPU takes ~32 MiB).
  chunk_rows_ = opt_.classifier_chunk_rows > 0 ? opt_.classifier_chunk_rows : default_chunk_rows(Vp, sizeof(T));
  chunk_rows_ = std::min(chunk_rows_, N);
  logits_ = DeviceBuffer<T>(chunk_rows_ * Vp, A, alloc);
  dresid_ = DeviceBuffer<T>(NG * C, A, alloc);
  dbig_ = DeviceBuffer<T>(NG * 4 * C, A, alloc);
  dqkv_ = DeviceBuffer<T>(NG * 3 * C, A, alloc);
  dsmall_ = DeviceBuffer<T>(NG * C, A, alloc);
  const auto S = MemCategory::kScratch;
  ln_scratch_ = DeviceBuffer<float>(size_t(layernorm_backward_scratch(C)), S, alloc);
  // The attention backward's delta rows and, in bf16, its stored score
  // gradients (activations, as the planner counts them: cost_model.cpp);
  // none in a forward-only model.
  const int64_t ds_budget = std::is_same_v<T, bf16> && !opt_.attention_cudnn ? opt_.attention_ds_budget : 0;
  const AttentionShape full{opt_.max_batch, opt_.max_seq, C, c.n_head};
  att_scratch_ =
      DeviceBuffer<float>(opt_.forward_only ? 0 : size_t(attention_backward_scratch(full, ds_budget)), A, alloc);
  // cuDNN's attention: its workspace (the engine's own and the backward's
  // fp32 dQ accumulator, both as the planner counts them on an H100/H200;
  // a forward-only model's, the forward engine's alone, at least
  // attention_cudnn_forward_engine_bytes so that use_cudnn() sees one), an
  // activation like the stored dS it replaces. Building the plans here
  // compiles cuDNN's kernels before the first step.
  if (opt_.attention_cudnn) {
    if (!std::is_same_v<T, bf16>) throw_error("cuDNN's attention needs bf16 (--precision bf16)");
    const std::string why = cudnn_attention_unavailable(full, !opt_.forward_only);  // builds the plans it runs
    if (!why.empty()) throw_error("--attention cudnn: " + why);
    const int64_t forward = cudnn_attention_forward_workspace(full);
    const int64_t bytes = opt_.forward_only ? std::max(forward, attention_cudnn_forward_engine_bytes())
                                            : std::max(forward, cudnn_attention_backward_workspace(full));
    cudnn_ws_ = DeviceBuffer<float>(size_t(bytes / 4), A, alloc);
  }
  loss_sum_ = DeviceBuffer<double>(1, S, alloc);
  sum_scratch_ = DeviceBuffer<double>(size_t(sum_squares_scratch()), S, alloc);
  batch_ = DeviceBuffer<int32_t>(size_t(5 * N + 1), S, alloc);  // tokens, targets, groups (<= 3N + 1)
  staging_elems_ = batch_.size();
  GPT_CUDA_OK(cudaMallocHost(&staging_, staging_elems_ * sizeof(int32_t)));
  GPT_CUDA_OK(cudaEventCreateWithFlags(&uploaded_, cudaEventDisableTiming));
  GPT_CUDA_OK(cudaEventRecord(uploaded_, stream_));
  set_shape(opt_.max_batch, opt_.max_seq);
}

template <typename T>
DeviceGPT<T>::~DeviceGPT() {
  if (stream_) cudaStreamSynchronize(stream_);
  if (uploaded_) cudaEventDestroy(uploaded_);
  if (staging_) cudaFreeHost(staging_);
  for (cudaEvent_t e : row_copied_)
    if (e) cudaEventDestroy(e);
  if (row_slots_) cudaFreeHost(row_slots_);
}

template <typename T>
void DeviceGPT<T>::set_shape(int B, int Tn) {
  GPT_CHECK(B >= 1 && B <= opt_.max_batch && Tn >= 1 && Tn <= opt_.max_seq,
            "shape B={} T={} outside allocated B<={} T<={}", B, Tn, opt_.max_batch, opt_.max_seq);
  B_ = B;
  T_ = Tn;
}

template <typename T>
void DeviceGPT<T>::set_batch(const int32_t* tokens, const int32_t* targets) {
  const int64_t N = int64_t(B_) * T_;
  groups_.build(tokens, N);
  // The previous upload read staging_. In training it finished long ago (a
  // whole micro-batch of kernels was queued after it), so this wait is free;
  // a validation queues its batches without waiting for their losses, so
  // here it waits for the device to reach the last batch, one batch behind
  // the host. Bounded, in case a collective the stream waits for is stuck.
  wait_event(uploaded_, "token upload");
  std::memcpy(staging_, tokens, size_t(N) * 4);
  std::memcpy(staging_ + N, targets ? targets : tokens, size_t(N) * 4);
  std::memcpy(staging_ + 2 * N, groups_.packed.data(), groups_.packed.size() * 4);
  const size_t n = size_t(2 * N) + groups_.packed.size();
  GPT_CUDA_OK(cudaMemcpyAsync(batch_.data(), staging_, n * 4, cudaMemcpyHostToDevice, stream_));
  GPT_CUDA_OK(cudaEventRecord(uploaded_, stream_));
}

template <typename T>
bool DeviceGPT<T>::set_decode(int pos) {
  const GPTConfig& c = layout_.config();
  check_decode_position(pos, opt_.max_seq);
  if (opt_.max_seq > attention_decode_max_positions()) {
    decode_pos_ = -1;
    return false;
  }
  if (pos >= 0 && kv_.size() == 0)
    kv_ = DeviceBuffer<T>(size_t(decode_cache_elems(c, opt_.max_seq)), MemCategory::kScratch, alloc_);
  decode_pos_ = pos;
  return true;
}

template <typename T>
void DeviceGPT<T>::forward_embedding(const T* emb) {
  const int64_t C = layout_.config().n_embd;
  const int64_t pos = std::max(decode_pos_, 0);
  check_decode_pass(decode_pos_, B_, T_, opt_.max_seq);
  embedding_forward(resid(0), batch_.data(), emb + layout_.wte_offset(), emb + layout_.wpe_offset() + pos * C, B_,
                    T_, C, stream_);
}

template <typename T>
void DeviceGPT<T>::block_forward(int layer, const T* p, BlockActs& a, const T* x, T* out) {
  const GPTConfig& c = layout_.config();
  const BlockOffsets& o = layout_.block_offsets();
  const int64_t N = int64_t(B_) * T_, C = c.n_embd;
  cudaStream_t s = stream_;
  T* ln1 = acts_.ln1(a);
  T* ln2 = acts_.ln2(a);
  T* gelu = acts_.gelu(a);
  layernorm_forward(ln1, a.ln1_mean.data(), a.ln1_rstd.data(), x, p + o.ln1_w, p + o.ln1_b, N, C, s);
  mm_->linear_forward(a.qkv.data(), ln1, p + o.qkv_w, p + o.qkv_b, N, C, 3 * C, s);
  // A decoding pass stores each position's k | v (the last 2C columns of its
  // qkv row) in the cache, one strided copy; its first pass (pos 0) is a
  // whole pass, a later one token attending to the cache.
  T* kv = decode_pos_ >= 0 ? kv_.data() + int64_t(layer) * opt_.max_seq * 2 * C : nullptr;
  if (kv)
    GPT_CUDA_OK(cudaMemcpy2DAsync(kv + int64_t(decode_pos_) * 2 * C, 2 * C * sizeof(T), a.qkv.data() + C,
                                  3 * C * sizeof(T), 2 * C * sizeof(T), size_t(T_), cudaMemcpyDeviceToDevice, s));
  if (decode_pos_ < 0 && use_cudnn()) {
    if constexpr (std::is_same_v<T, bf16>)
      cudnn_attention_forward(a.atty.data(), a.lse.data(), a.qkv.data(), {B_, T_, C, c.n_head}, cudnn_ws_.data(),
                              int64_t(cudnn_ws_.size()) * 4, s);
  } else if (decode_pos_ <= 0)
    attention_forward(a.atty.data(), a.lse.data(), a.qkv.data(), {B_, T_, C, c.n_head}, s,
                      std::is_same_v<T, bf16> && opt_.attention_wide_forward ? AttentionKernel::kTensorCoreWide
                                                                              : AttentionKernel::kAuto);
  else
    attention_decode(a.atty.data(), a.qkv.data(), kv, int64_t(decode_pos_) + 1, C, c.n_head, s);
  mm_->linear_residual_forward(a.res2.data(), a.atty.data(), p + o.attproj_w, p + o.attproj_b, x, N, C, C, s);
  layernorm_forward(ln2, a.ln2_mean.data(), a.ln2_rstd.data(), a.res2.data(), p + o.ln2_w, p + o.ln2_b, N, C, s);
  mm_->linear_forward(a.fch.data(), ln2, p + o.fc_w, p + o.fc_b, N, C, 4 * C, s, gelu);
  mm_->linear_residual_forward(out, gelu, p + o.fcproj_w, p + o.fcproj_b, a.res2.data(), N, 4 * C, C,
                               s);
}

template <typename T>
void DeviceGPT<T>::forward_block(int layer, const T* block) {
  block_forward(layer, block, acts_.block(layer), resid(layer), resid(layer + 1));
}

template <typename T>
void DeviceGPT<T>::final_ln(const T* fin) {
  const int64_t N = int64_t(B_) * T_, C = layout_.config().n_embd;
  layernorm_forward(lnf_.data(), lnf_mean_.data(), lnf_rstd_.data(), resid(layout_.config().n_layer), fin, fin + C,
                    N, C, stream_);
}

template <typename T>
void DeviceGPT<T>::forward_head(const T* fin, const T* emb, T* emb_grad, float loss_scale) {
  const GPTConfig& c = layout_.config();
  const int64_t N = int64_t(B_) * T_;
  GPT_CHECK(!emb_grad || !opt_.forward_only, "no gradients from a forward-only model");
  final_ln(fin);
  ClassifierArgs<T> a;
  a.inp = lnf_.data();
  a.wte = emb + layout_.wte_offset();
  a.targets = batch_.data() + N;
  a.losses = losses_.data();
  a.logits = logits_.data();
  a.chunk_rows = chunk_rows_;
  if (emb_grad) {
    a.dinp = dlnf_.data();
    a.dwte = emb_grad + layout_.wte_offset();
    a.loss_scale = loss_scale;
  }
  classifier_forward_backward(*mm_, a, {N, c.n_embd, c.vocab_size, c.padded_vocab()}, stream_);
  sum_values(losses_.data(), N, loss_sum_.data(), sum_scratch_.data(), stream_);
  rows_in_loss_ += N;
}

template <typename T>
double DeviceGPT<T>::take_loss() {
  double sum = 0;
  GPT_CUDA_OK(cudaMemcpyAsync(&sum, loss_sum_.data(), sizeof sum, cudaMemcpyDeviceToHost, stream_));
  wait_stream(stream_, "loss");
  loss_sum_.zero(stream_);
  const double mean = rows_in_loss_ > 0 ? sum / double(rows_in_loss_) : 0.0;
  rows_in_loss_ = 0;
  return mean;
}

template <typename T>
void DeviceGPT<T>::copy_row_losses(int slot) {
  GPT_CHECK(slot == 0 || slot == 1, "row-loss slot {} is not 0 or 1", slot);
  const size_t max_rows = size_t(opt_.max_batch) * size_t(opt_.max_seq);
  if (!row_slots_) {  // first use (HellaSwag): not in a training step
    GPT_CUDA_OK(cudaMallocHost(&row_slots_, 2 * max_rows * sizeof(float)));
    for (cudaEvent_t& e : row_copied_) GPT_CUDA_OK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  }
  const size_t N = size_t(B_) * size_t(T_);
  GPT_CUDA_OK(cudaMemcpyAsync(row_slots_ + size_t(slot) * max_rows, losses_.data(), N * sizeof(float),
                              cudaMemcpyDeviceToHost, stream_));
  GPT_CUDA_OK(cudaEventRecord(row_copied_[slot], stream_));
}

template <typename T>
const float* DeviceGPT<T>::row_losses_ready(int slot) {
  GPT_CHECK(row_slots_ && (slot == 0 || slot == 1), "row losses of slot {} were never copied", slot);
  wait_event(row_copied_[slot], "evaluation losses");
  return row_slots_ + size_t(slot) * size_t(opt_.max_batch) * size_t(opt_.max_seq);
}

template <typename T>
void DeviceGPT<T>::backward_final(const T* fin, T* fin_grad) {
  GPT_CHECK(!opt_.forward_only, "no backward of a forward-only model");
  const int64_t N = int64_t(B_) * T_, C = layout_.config().n_embd;
  GPT_CUDA_OK(cudaMemsetAsync(dresid_.data(), 0, size_t(N * C) * sizeof(T), stream_));
  layernorm_backward(dresid_.data(), fin_grad, fin_grad + C, ln_scratch_.data(), dlnf_.data(),
                     resid(layout_.config().n_layer), fin, lnf_mean_.data(), lnf_rstd_.data(), N, C, stream_);
}

template <typename T>
void DeviceGPT<T>::backward_block(int layer, const T* p, T* g) {
  const GPTConfig& c = layout_.config();
  const BlockOffsets& o = layout_.block_offsets();
  const int64_t N = int64_t(B_) * T_, C = c.n_embd;
  cudaStream_t s = stream_;
  const T* x = resid(layer);
  BlockActs& a = acts_.block(layer);
  GPT_CHECK(decode_pos_ < 0 && !opt_.forward_only, "no backward of a decoding pass or a forward-only model");
  if (opt_.activation_checkpointing) block_forward(layer, p, a, x, dbig_.data());  // recompute; output is scratch
  // --recompute: the GELU kernel (GPT-2's tanh GELU, as the fused epilogue
  // computes it: gelu_epilogue_check.hpp) and LayerNorm again on kept inputs.
  const bool re_ln = recomputes_ln(acts_.recompute());
  if (recomputes_gelu(acts_.recompute())) gelu_forward(acts_.gelu(a), a.fch.data(), N * 4 * C, s);
  if (re_ln)
    layernorm_forward(acts_.ln2(a), a.ln2_mean.data(), a.ln2_rstd.data(), a.res2.data(), p + o.ln2_w, p + o.ln2_b, N,
                      C, s);
  T* dres = dresid_.data();  // in: d(block output); out: d(block input)
  // d(fc pre-activation) = (dres W_fcproj) * GELU'(fch): the GELU gradient rides on the GEMM (DGELU epilogue).
  mm_->linear_backward(dbig_.data(), g + o.fcproj_w, g + o.fcproj_b, dres, acts_.gelu(a), p + o.fcproj_w, N, 4 * C, C,
                       s, a.fch.data());
  mm_->linear_backward(dsmall_.data(), g + o.fc_w, g + o.fc_b, dbig_.data(), acts_.ln2(a), p + o.fc_w, N, C, 4 * C, s);
  layernorm_backward(dres, g + o.ln2_w, g + o.ln2_b, ln_scratch_.data(), dsmall_.data(), a.res2.data(),
                     p + o.ln2_w, a.ln2_mean.data(), a.ln2_rstd.data(), N, C, s);
  mm_->linear_backward(dsmall_.data(), g + o.attproj_w, g + o.attproj_b, dres, a.atty.data(), p + o.attproj_w, N, C,
                       C, s);
  if (use_cudnn()) {
    if constexpr (std::is_same_v<T, bf16>)
      cudnn_attention_backward(dqkv_.data(), dsmall_.data(), a.qkv.data(), a.atty.data(), a.lse.data(),
                               {B_, T_, C, c.n_head}, cudnn_ws_.data(), int64_t(cudnn_ws_.size()) * 4, s);
  } else {
    attention_backward(dqkv_.data(), att_scratch_.data(), int64_t(att_scratch_.size()), dsmall_.data(),
                       a.qkv.data(), a.atty.data(), a.lse.data(), {B_, T_, C, c.n_head}, s);
  }
  if (re_ln)  // the shared buffer held ln_2's output until here
    layernorm_forward(acts_.ln1(a), a.ln1_mean.data(), a.ln1_rstd.data(), x, p + o.ln1_w, p + o.ln1_b, N, C, s);
  mm_->linear_backward(dsmall_.data(), g + o.qkv_w, g + o.qkv_b, dqkv_.data(), acts_.ln1(a), p + o.qkv_w, N, C, 3 * C,
                       s);
  layernorm_backward(dres, g + o.ln1_w, g + o.ln1_b, ln_scratch_.data(), dsmall_.data(), x, p + o.ln1_w,
                     a.ln1_mean.data(), a.ln1_rstd.data(), N, C, s);
}

template <typename T>
void DeviceGPT<T>::backward_embedding(T* emb_grad) {
  GPT_CHECK(!opt_.forward_only, "no backward of a forward-only model");
  const int64_t N = int64_t(B_) * T_;
  embedding_backward(emb_grad + layout_.wte_offset(), emb_grad + layout_.wpe_offset(), dresid_.data(),
                     batch_.data() + 2 * N, groups_.num_groups, B_, T_, layout_.config().n_embd, stream_);
}

template <typename T>
void DeviceGPT<T>::logits_row(const T* fin, const T* emb, int64_t row, float* out) {
  const GPTConfig& c = layout_.config();
  GPT_CHECK(row >= 0 && row < int64_t(B_) * T_, "row {} out of range", row);
  final_ln(fin);
  const int64_t Vp = c.padded_vocab();
  classifier_logits_row(*mm_, logits_.data(), lnf_.data() + row * c.n_embd, emb + layout_.wte_offset(),
                        {1, c.n_embd, c.vocab_size, Vp}, stream_);
  if (row_logits_.size() == 0) row_logits_ = DeviceBuffer<float>(size_t(Vp), MemCategory::kScratch, alloc_);
  convert(row_logits_.data(), logits_.data(), Vp, stream_);
  GPT_CUDA_OK(cudaMemcpyAsync(out, row_logits_.data(), size_t(Vp) * 4, cudaMemcpyDeviceToHost, stream_));
  wait_stream(stream_, "sampling logits");
}

template class DeviceGPT<float>;
template class DeviceGPT<bf16>;

}  // namespace gpt::cuda
