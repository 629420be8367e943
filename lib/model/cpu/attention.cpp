#include "model/cpu/attention.hpp"

#include <omp.h>

#include <cmath>
#include <limits>

#include "core/error.hpp"
#include "model/cpu/eigen_maps.hpp"

namespace gpt::cpu {
namespace {

// Softmax of scale * row[0, n), in place: max-subtracted exponentials, then
// the sum's reciprocal, in SIMD packets (Eigen's exp; std::exp was a scalar
// libm call per score). scale > 0, so max(row) * scale is max(row * scale)
// exactly. Shared by whole passes and the decoding cache, which must agree.
template <typename T>
void softmax_scaled(T* row, int64_t n, T scale) {
  ArrMap<T> r(row, n);
  const T mx = r.maxCoeff() * scale;
  r = (r * scale - mx).exp();
  r *= T(1) / r.sum();
}

}  // namespace

// Heads are independent: the (b, h) loop is the parallel one and each small
// product runs single-threaded inside it (Eigen does not nest parallelism).
template <typename T>
void attention_forward(T* out, T* att, const T* qkv, const AttentionShape& s) {
  const int64_t Tn = s.T, C = s.C, hs = C / s.NH;
  const T scale = T(1) / std::sqrt(static_cast<T>(hs));
#pragma omp parallel for schedule(static)
  for (int64_t bh = 0; bh < s.B * s.NH; ++bh) {
    const int64_t b = bh / s.NH, h = bh % s.NH;
    const T* base = qkv + b * Tn * 3 * C + h * hs;
    CMapRS<T> q(base, Tn, hs, Eigen::OuterStride<>(3 * C));
    CMapRS<T> k(base + C, Tn, hs, Eigen::OuterStride<>(3 * C));
    CMapRS<T> v(base + 2 * C, Tn, hs, Eigen::OuterStride<>(3 * C));
    MapR<T> p(att + bh * Tn * Tn, Tn, Tn);
    p.noalias() = q * k.transpose();
    for (int64_t i = 0; i < Tn; ++i) {
      T* row = p.row(i).data();
      softmax_scaled(row, i + 1, scale);
      for (int64_t j = i + 1; j < Tn; ++j) row[j] = 0;
    }
    MapRS<T> y(out + b * Tn * C + h * hs, Tn, hs, Eigen::OuterStride<>(C));
    y.noalias() = p.template triangularView<Eigen::Lower>() * v;
  }
}

// The same arithmetic as one row of attention_forward (softmax_scaled), so
// a cached pass agrees with a whole one up to the order of the products' sums.
template <typename T>
void attention_decode(T* out, T* scores, const T* q, const T* kv, int64_t P, int64_t C, int64_t NH) {
  const int64_t hs = C / NH;
  const T scale = T(1) / std::sqrt(static_cast<T>(hs));
#pragma omp parallel for schedule(static)
  for (int64_t h = 0; h < NH; ++h) {
    CMapRS<T> k(kv + h * hs, P, hs, Eigen::OuterStride<>(2 * C));
    CMapRS<T> v(kv + C + h * hs, P, hs, Eigen::OuterStride<>(2 * C));
    Vec<T> s(scores + h * P, P);
    s.noalias() = CVec<T>(q + h * hs, hs) * k.transpose();
    softmax_scaled(s.data(), P, scale);
    Vec<T>(out + h * hs, hs).noalias() = s * v;
  }
}

template <typename T>
void attention_backward(T* dqkv, const T* dout, const T* qkv, const T* att, T* scratch, int scratch_threads,
                        const AttentionShape& s) {
  GPT_CHECK(omp_get_max_threads() <= scratch_threads, "attention scratch sized for {} threads, {} in use",
            scratch_threads, omp_get_max_threads());
  const int64_t Tn = s.T, C = s.C, hs = C / s.NH;
  const T scale = T(1) / std::sqrt(static_cast<T>(hs));
#pragma omp parallel for schedule(static)
  for (int64_t bh = 0; bh < s.B * s.NH; ++bh) {
    const int64_t b = bh / s.NH, h = bh % s.NH;
    const int64_t off = b * Tn * 3 * C + h * hs;
    const Eigen::OuterStride<> st3(3 * C);
    CMapRS<T> q(qkv + off, Tn, hs, st3), k(qkv + off + C, Tn, hs, st3), v(qkv + off + 2 * C, Tn, hs, st3);
    MapRS<T> dq(dqkv + off, Tn, hs, st3), dk(dqkv + off + C, Tn, hs, st3), dv(dqkv + off + 2 * C, Tn, hs, st3);
    CMapRS<T> dy(dout + b * Tn * C + h * hs, Tn, hs, Eigen::OuterStride<>(C));
    CMapR<T> p(att + bh * Tn * Tn, Tn, Tn);
    MapR<T> ds(scratch + omp_get_thread_num() * attention_scratch_per_thread(Tn), Tn, Tn);

    dv.noalias() = p.transpose().template triangularView<Eigen::Upper>() * dy;
    ds.noalias() = dy * v.transpose();  // dP
    // Softmax backward, row by row: dS_ij = P_ij (dP_ij - sum_k P_ik dP_ik).
    for (int64_t i = 0; i < Tn; ++i) {
      const T* pr = p.row(i).data();
      T* dr = ds.row(i).data();
      T dot = 0;
      for (int64_t j = 0; j <= i; ++j) dot += pr[j] * dr[j];
      for (int64_t j = 0; j <= i; ++j) dr[j] = pr[j] * (dr[j] - dot) * scale;
      for (int64_t j = i + 1; j < Tn; ++j) dr[j] = 0;
    }
    dq.noalias() = ds.template triangularView<Eigen::Lower>() * k;
    dk.noalias() = ds.transpose().template triangularView<Eigen::Upper>() * q;
  }
}

template void attention_forward<float>(float*, float*, const float*, const AttentionShape&);
template void attention_forward<double>(double*, double*, const double*, const AttentionShape&);
template void attention_decode<float>(float*, float*, const float*, const float*, int64_t, int64_t, int64_t);
template void attention_decode<double>(double*, double*, const double*, const double*, int64_t, int64_t, int64_t);
template void attention_backward<float>(float*, const float*, const float*, const float*, float*, int, const AttentionShape&);
template void attention_backward<double>(double*, const double*, const double*, const double*, double*, int, const AttentionShape&);

}  // namespace gpt::cpu
