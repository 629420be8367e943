#include "model/gpt.hpp"

#include <omp.h>

#include <algorithm>

#include "core/error.hpp"
#include "model/cpu/attention.hpp"
#include "model/cpu/classifier.hpp"
#include "model/cpu/embedding.hpp"
#include "model/cpu/gelu.hpp"
#include "model/cpu/layernorm.hpp"
#include "model/cpu/matmul.hpp"

namespace gpt {

void resolve_shape(GPTOptions& opt, const GPTConfig& c) {
  if (opt.max_seq == 0) opt.max_seq = c.seq_len;
  GPT_CHECK(opt.max_batch >= 1 && opt.max_seq >= 1 && opt.max_seq <= c.seq_len, "bad GPT shape B={} T={}",
            opt.max_batch, opt.max_seq);
}

void check_decode_position(int pos, int max_seq) {
  GPT_CHECK(pos >= -1 && pos < max_seq, "decode position {} outside [-1, {})", pos, max_seq);
}

void check_decode_pass(int pos, int B, int T, int max_seq) {
  GPT_CHECK(pos < 0 || (B == 1 && (pos == 0 || T == 1) && pos + T <= max_seq),
            "a decoding pass at position {} is 1 sequence of its first tokens or of 1 token, not B={} T={}", pos, B,
            T);
}

template <typename T>
GPT<T>::GPT(const ParamLayout& layout, const GPTOptions& opt, MemoryTracker* tracker)
    : layout_(layout), opt_(opt), tracker_(tracker) {
  const GPTConfig& c = layout.config();
  resolve_shape(opt_, c);
  const int64_t N = int64_t(opt_.max_batch) * opt_.max_seq, C = c.n_embd, Vp = c.padded_vocab();
  acts_ = Acts(c.n_layer, N, C, c.n_head, opt_.recompute, opt_.activation_checkpointing || opt_.forward_only,
               tracker);
  const auto A = MemCategory::kActivations;
  lnf_ = Buffer<T>(N * C, A, tracker);
  lnf_mean_ = Buffer<T>(N, A, tracker);
  lnf_rstd_ = Buffer<T>(N, A, tracker);
  const int64_t NG = opt_.forward_only ? 0 : N;  // rows of the backward's working gradients
  dlnf_ = Buffer<T>(NG * C, A, tracker);
  losses_ = Buffer<T>(N, A, tracker);
  chunk_rows_ = opt_.classifier_chunk_rows > 0 ? opt_.classifier_chunk_rows
                                               : std::max<int64_t>(128, (int64_t(8) << 20) / Vp);
  chunk_rows_ = std::min(chunk_rows_, N);
  logits_ = Buffer<T>(chunk_rows_ * Vp, A, tracker);
  dresid_ = Buffer<T>(NG * C, A, tracker);
  dbig_ = Buffer<T>(NG * 4 * C, A, tracker);
  dqkv_ = Buffer<T>(NG * 3 * C, A, tracker);
  dsmall_ = Buffer<T>(NG * C, A, tracker);
  scratch_threads_ = omp_get_max_threads();
  att_scratch_ = Buffer<T>(cpu::attention_scratch(opt_.max_seq, c.n_head, scratch_threads_), A, tracker);
  set_shape(opt_.max_batch, opt_.max_seq);
}

template <typename T>
GPT<T>::~GPT() = default;

template <typename T>
void GPT<T>::set_shape(int B, int Tn) {
  GPT_CHECK(B >= 1 && B <= opt_.max_batch && Tn >= 1 && Tn <= opt_.max_seq,
            "shape B={} T={} outside allocated B<={} T<={}", B, Tn, opt_.max_batch, opt_.max_seq);
  B_ = B;
  T_ = Tn;
}

template <typename T>
void GPT<T>::set_decode(int pos) {
  const GPTConfig& c = layout_.config();
  check_decode_position(pos, opt_.max_seq);
  if (pos >= 0 && kv_.size() == 0)
    kv_ = Buffer<T>(size_t(decode_cache_elems(c, opt_.max_seq)), MemCategory::kScratch, tracker_);
  decode_pos_ = pos;
}

template <typename T>
void GPT<T>::forward_embedding(const T* emb, const int32_t* tokens) {
  const int64_t C = layout_.config().n_embd;
  const int64_t pos = std::max(decode_pos_, 0);
  check_decode_pass(decode_pos_, B_, T_, opt_.max_seq);
  cpu::embedding_forward(resid(0), tokens, emb + layout_.wte_offset(), emb + layout_.wpe_offset() + pos * C, B_,
                         T_, C);
}

template <typename T>
void GPT<T>::block_forward(int layer, const T* p, BlockActs& a, const T* x, T* out) {
  const GPTConfig& c = layout_.config();
  const BlockOffsets& o = layout_.block_offsets();
  const int64_t N = int64_t(B_) * T_, C = c.n_embd;
  T* ln1 = acts_.ln1(a);
  cpu::layernorm_forward(ln1, a.ln1_mean.data(), a.ln1_rstd.data(), x, p + o.ln1_w, p + o.ln1_b, N, C);
  cpu::linear_forward(a.qkv.data(), ln1, p + o.qkv_w, p + o.qkv_b, N, C, 3 * C);
  // A decoding pass stores each position's k | v (the last 2C columns of its
  // qkv row) in the cache; its first pass (pos 0) is a whole pass, a later
  // one token attending to the cache.
  T* kv = decode_pos_ >= 0 ? kv_.data() + int64_t(layer) * opt_.max_seq * 2 * C : nullptr;
  if (kv)
    for (int64_t t = 0; t < T_; ++t)
      std::copy_n(a.qkv.data() + t * 3 * C + C, 2 * C, kv + (decode_pos_ + t) * 2 * C);
  if (decode_pos_ <= 0)
    cpu::attention_forward(a.atty.data(), a.lse.data(), a.qkv.data(), att_scratch_.data(), scratch_threads_,
                           {B_, T_, C, c.n_head});
  else
    cpu::attention_decode(a.atty.data(), att_scratch_.data(), a.qkv.data(), kv, decode_pos_ + 1, C, c.n_head);
  cpu::linear_forward(a.res2.data(), a.atty.data(), p + o.attproj_w, p + o.attproj_b, N, C, C);
  T* res2 = a.res2.data();
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < N * C; ++i) res2[i] += x[i];
  T* ln2 = acts_.ln2(a);
  T* gelu = acts_.gelu(a);
  cpu::layernorm_forward(ln2, a.ln2_mean.data(), a.ln2_rstd.data(), res2, p + o.ln2_w, p + o.ln2_b, N, C);
  cpu::linear_forward(a.fch.data(), ln2, p + o.fc_w, p + o.fc_b, N, C, 4 * C);
  cpu::gelu_forward(gelu, a.fch.data(), N * 4 * C);
  cpu::linear_forward(out, gelu, p + o.fcproj_w, p + o.fcproj_b, N, 4 * C, C);
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < N * C; ++i) out[i] += res2[i];
}

template <typename T>
void GPT<T>::forward_block(int layer, const T* block) {
  block_forward(layer, block, acts_.block(layer), resid(layer), resid(layer + 1));
}

template <typename T>
void GPT<T>::final_ln(const T* fin) {
  const int64_t N = int64_t(B_) * T_, C = layout_.config().n_embd;
  cpu::layernorm_forward(lnf_.data(), lnf_mean_.data(), lnf_rstd_.data(), resid(layout_.config().n_layer),
                         fin, fin + C, N, C);
}

template <typename T>
double GPT<T>::forward_head(const T* fin, const T* emb, const int32_t* targets, T* emb_grad, T loss_scale) {
  const GPTConfig& c = layout_.config();
  const int64_t N = int64_t(B_) * T_;
  GPT_CHECK(!emb_grad || !opt_.forward_only, "no gradients from a forward-only model");
  final_ln(fin);
  cpu::ClassifierArgs<T> a;
  a.inp = lnf_.data();
  a.wte = emb + layout_.wte_offset();
  a.targets = targets;
  a.losses = losses_.data();
  a.logits = logits_.data();
  a.chunk_rows = chunk_rows_;
  if (emb_grad) {
    a.dinp = dlnf_.data();
    a.dwte = emb_grad + layout_.wte_offset();
    a.loss_scale = loss_scale;
  }
  cpu::classifier_forward_backward(a, {N, c.n_embd, c.vocab_size, c.padded_vocab()});
  double sum = 0;
  for (int64_t i = 0; i < N; ++i) sum += losses_[i];
  return sum / static_cast<double>(N);
}

template <typename T>
void GPT<T>::backward_final(const T* fin, T* fin_grad) {
  GPT_CHECK(!opt_.forward_only, "no backward of a forward-only model");
  const int64_t N = int64_t(B_) * T_, C = layout_.config().n_embd;
  std::fill(dresid_.data(), dresid_.data() + N * C, T(0));
  cpu::layernorm_backward(dresid_.data(), fin_grad, fin_grad + C, dlnf_.data(), resid(layout_.config().n_layer),
                          fin, lnf_mean_.data(), lnf_rstd_.data(), N, C);
}

template <typename T>
void GPT<T>::backward_block(int layer, const T* p, T* g) {
  GPT_CHECK(decode_pos_ < 0 && !opt_.forward_only, "no backward of a decoding pass or a forward-only model");
  const GPTConfig& c = layout_.config();
  const BlockOffsets& o = layout_.block_offsets();
  const int64_t N = int64_t(B_) * T_, C = c.n_embd;
  const T* x = resid(layer);
  BlockActs& a = acts_.block(layer);
  if (opt_.activation_checkpointing) {
    // Recompute this block's internals from its saved input. The output goes
    // to dbig_ (scratch, overwritten just below): resid(layer+1) is unchanged.
    block_forward(layer, p, a, x, dbig_.data());
  }
  // --recompute: the same kernels on the same inputs give forward's values.
  const bool re_ln = recomputes_ln(acts_.recompute());
  if (recomputes_gelu(acts_.recompute())) cpu::gelu_forward(acts_.gelu(a), a.fch.data(), N * 4 * C);
  if (re_ln)
    cpu::layernorm_forward(acts_.ln2(a), a.ln2_mean.data(), a.ln2_rstd.data(), a.res2.data(), p + o.ln2_w,
                           p + o.ln2_b, N, C);
  T* dres = dresid_.data();  // in: d(block output); out: d(block input)
  cpu::linear_backward(dbig_.data(), g + o.fcproj_w, g + o.fcproj_b, dres, acts_.gelu(a), p + o.fcproj_w, N, 4 * C,
                       C);
  cpu::gelu_backward(dbig_.data(), a.fch.data(), dbig_.data(), N * 4 * C);
  cpu::linear_backward(dsmall_.data(), g + o.fc_w, g + o.fc_b, dbig_.data(), acts_.ln2(a), p + o.fc_w, N, C, 4 * C);
  // The residual passes d(out) through to res2; ln_2's branch adds to it.
  cpu::layernorm_backward(dres, g + o.ln2_w, g + o.ln2_b, dsmall_.data(), a.res2.data(), p + o.ln2_w,
                          a.ln2_mean.data(), a.ln2_rstd.data(), N, C);
  cpu::linear_backward(dsmall_.data(), g + o.attproj_w, g + o.attproj_b, dres, a.atty.data(), p + o.attproj_w, N,
                       C, C);
  cpu::attention_backward(dqkv_.data(), dsmall_.data(), a.qkv.data(), a.lse.data(), att_scratch_.data(),
                          scratch_threads_, {B_, T_, C, c.n_head});
  if (re_ln)  // the shared buffer held ln_2's output until here
    cpu::layernorm_forward(acts_.ln1(a), a.ln1_mean.data(), a.ln1_rstd.data(), x, p + o.ln1_w, p + o.ln1_b, N, C);
  cpu::linear_backward(dsmall_.data(), g + o.qkv_w, g + o.qkv_b, dqkv_.data(), acts_.ln1(a), p + o.qkv_w, N, C,
                       3 * C);
  cpu::layernorm_backward(dres, g + o.ln1_w, g + o.ln1_b, dsmall_.data(), x, p + o.ln1_w, a.ln1_mean.data(),
                          a.ln1_rstd.data(), N, C);
}

template <typename T>
void GPT<T>::backward_embedding(const int32_t* tokens, T* emb_grad) {
  GPT_CHECK(!opt_.forward_only, "no backward of a forward-only model");
  cpu::embedding_backward(emb_grad + layout_.wte_offset(), emb_grad + layout_.wpe_offset(), dresid_.data(), tokens,
                          B_, T_, layout_.config().n_embd);
}

template <typename T>
void GPT<T>::logits_row(const T* fin, const T* emb, int64_t row, T* out) {
  const GPTConfig& c = layout_.config();
  GPT_CHECK(row >= 0 && row < int64_t(B_) * T_, "row {} out of range", row);
  final_ln(fin);
  cpu::classifier_logits_row(out, lnf_.data() + row * c.n_embd, emb + layout_.wte_offset(),
                             {1, c.n_embd, c.vocab_size, c.padded_vocab()});
}

template <typename T>
double forward_backward(GPT<T>& m, const std::vector<const T*>& params, const std::vector<T*>& grads,
                        const int32_t* tokens, const int32_t* targets, T loss_scale) {
  const ParamLayout& L = m.layout();
  const int nl = L.config().n_layer;
  const bool grad = !grads.empty();
  m.forward_embedding(params[L.embedding_unit()], tokens);
  for (int l = 0; l < nl; ++l) m.forward_block(l, params[L.block_unit(l)]);
  double loss = m.forward_head(params[L.final_unit()], params[L.embedding_unit()], targets,
                               grad ? grads[L.embedding_unit()] : nullptr, loss_scale);
  if (!grad) return loss;
  m.backward_final(params[L.final_unit()], grads[L.final_unit()]);
  for (int l = nl - 1; l >= 0; --l) m.backward_block(l, params[L.block_unit(l)], grads[L.block_unit(l)]);
  m.backward_embedding(tokens, grads[L.embedding_unit()]);
  return loss;
}

template class GPT<float>;
template class GPT<double>;
template double forward_backward<float>(GPT<float>&, const std::vector<const float*>&, const std::vector<float*>&,
                                        const int32_t*, const int32_t*, float);
template double forward_backward<double>(GPT<double>&, const std::vector<const double*>&,
                                         const std::vector<double*>&, const int32_t*, const int32_t*, double);

}  // namespace gpt
