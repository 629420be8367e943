#include "model/cpu/attention.hpp"

#include <omp.h>

#include <cmath>

#include "core/error.hpp"
#include "model/cpu/eigen_maps.hpp"

namespace gpt::cpu {
namespace {

// Softmax of scale * row[0, n), in place: max-subtracted exponentials, then
// the sum's reciprocal, in SIMD packets (Eigen's exp; std::exp was a scalar
// libm call per score). Returns the log-sum-exp of scale * row. scale > 0,
// so max(row) * scale is max(row * scale) exactly. Shared by whole passes
// and the decoding cache, which must agree.
template <typename T>
T softmax_scaled(T* row, int64_t n, T scale) {
  ArrMap<T> r(row, n);
  const T mx = r.maxCoeff() * scale;
  r = (r * scale - mx).exp();
  const T sum = r.sum();
  r *= T(1) / sum;
  return mx + std::log(sum);
}

void check_scratch(int scratch_threads) {
  GPT_CHECK(omp_get_max_threads() <= scratch_threads, "attention scratch sized for {} threads, {} in use",
            scratch_threads, omp_get_max_threads());
}

}  // namespace

// Every (b, h, query block) is independent in forward. Query block
// [i0, i0 + n) sees keys [0, m = i0 + n); the scores above the diagonal are
// zeroed so whole-block products can be used (causal structure still halves
// the work across blocks). Each small product runs single-threaded (Eigen
// does not nest parallelism). Two schedules of the same blocks:
//  - heads (b, h) dealt out statically, each walked block by block on one
//    thread (its keys and values stay in that core's cache), when they
//    divide evenly among the threads;
//  - otherwise every (b, h, block) is a task of a dynamic schedule, a head's
//    blocks last-first (the last sees the most keys), so a head's blocks
//    spread over threads: gpt2-124m's 12 heads at micro-batch 1 on a
//    16-thread rank would leave 4 threads idle and 8 doing two heads.
// A block's rows are computed by the same calls whichever thread or
// schedule takes it, in a scratch aligned alike on every thread: results do
// not depend on the thread count, bit for bit (CpuAttention.ThreadCountChangesNothing).
template <typename T>
void attention_forward(T* out, T* lse, const T* qkv, T* scratch, int scratch_threads, const AttentionShape& s) {
  check_scratch(scratch_threads);
  const int64_t Tn = s.T, C = s.C, hs = C / s.NH, rows = std::min(kAttentionQueryRows, Tn);
  const int64_t heads = s.B * s.NH, blocks = (Tn + rows - 1) / rows;
  const T scale = T(1) / std::sqrt(static_cast<T>(hs));
  const auto block = [&](int64_t bh, int64_t i0) {
    const int64_t b = bh / s.NH, h = bh % s.NH, n = std::min(rows, Tn - i0), m = i0 + n;
    const T* base = qkv + b * Tn * 3 * C + h * hs;
    const Eigen::OuterStride<> st3(3 * C);
    CMapRS<T> q(base, Tn, hs, st3), k(base + C, Tn, hs, st3), v(base + 2 * C, Tn, hs, st3);
    MapRS<T> y(out + b * Tn * C + h * hs, Tn, hs, Eigen::OuterStride<>(C));
    T* sc = scratch + omp_get_thread_num() * attention_scratch_per_thread(Tn);
    MapR<T> p(sc, n, m);
    p.noalias() = q.middleRows(i0, n) * k.topRows(m).transpose();
    for (int64_t r = 0; r < n; ++r) {
      T* row = sc + r * m;
      const int64_t len = i0 + r + 1;
      lse[bh * Tn + i0 + r] = softmax_scaled(row, len, scale);
      std::fill(row + len, row + m, T(0));
    }
    y.middleRows(i0, n).noalias() = p * v.topRows(m);
  };
  if (heads % omp_get_max_threads() == 0) {
#pragma omp parallel for schedule(static)
    for (int64_t bh = 0; bh < heads; ++bh)
      for (int64_t i0 = 0; i0 < Tn; i0 += rows) block(bh, i0);
  } else {
#pragma omp parallel for schedule(dynamic, 1)
    for (int64_t task = 0; task < heads * blocks; ++task)
      block(task / blocks, (blocks - 1 - task % blocks) * rows);
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
    Vec<T> sv(scores + h * P, P);
    sv.noalias() = CVec<T>(q + h * hs, hs) * k.transpose();
    softmax_scaled(sv.data(), P, scale);
    Vec<T>(out + h * hs, hs).noalias() = sv * v;
  }
}

// Per query block: P = exp(scale * q k^T - lse) recomputed, dP = dy v^T,
// dS = P (dP - rowsum(P dP)) * scale (the softmax's gradient; the row sum
// is over the block's own recomputed row, so forward's output is not
// needed), then dq = dS k for the block and dk += dS^T q, dv += P^T dy over
// the keys it sees. The parallel loop is over (b, h) only: dk and dv sum
// over a head's query blocks, and splitting those across threads while
// keeping the result independent of the thread count would need either a
// second pass over key blocks (7 products instead of 5) or every block's
// partial sums kept (T^2 / 64 x head size per head).
template <typename T>
void attention_backward(T* dqkv, const T* dout, const T* qkv, const T* lse, T* scratch, int scratch_threads,
                        const AttentionShape& s) {
  check_scratch(scratch_threads);
  const int64_t Tn = s.T, C = s.C, hs = C / s.NH, rows = std::min(kAttentionQueryRows, Tn);
  const T scale = T(1) / std::sqrt(static_cast<T>(hs));
#pragma omp parallel for schedule(static)
  for (int64_t bh = 0; bh < s.B * s.NH; ++bh) {
    const int64_t b = bh / s.NH, h = bh % s.NH;
    const int64_t off = b * Tn * 3 * C + h * hs;
    const Eigen::OuterStride<> st3(3 * C);
    CMapRS<T> q(qkv + off, Tn, hs, st3), k(qkv + off + C, Tn, hs, st3), v(qkv + off + 2 * C, Tn, hs, st3);
    MapRS<T> dq(dqkv + off, Tn, hs, st3), dk(dqkv + off + C, Tn, hs, st3), dv(dqkv + off + 2 * C, Tn, hs, st3);
    CMapRS<T> dy(dout + b * Tn * C + h * hs, Tn, hs, Eigen::OuterStride<>(C));
    T* sc = scratch + omp_get_thread_num() * attention_scratch_per_thread(Tn);
    T* dsc = sc + rows * Tn;
    dk.setZero();
    dv.setZero();
    for (int64_t i0 = 0; i0 < Tn; i0 += rows) {
      const int64_t n = std::min(rows, Tn - i0), m = i0 + n;
      MapR<T> p(sc, n, m), ds(dsc, n, m);
      p.noalias() = q.middleRows(i0, n) * k.topRows(m).transpose();
      ds.noalias() = dy.middleRows(i0, n) * v.topRows(m).transpose();
      for (int64_t r = 0; r < n; ++r) {
        const int64_t len = i0 + r + 1;
        ArrMap<T> pr(sc + r * m, len), dr(dsc + r * m, len);
        pr = (pr * scale - lse[bh * Tn + i0 + r]).exp();
        const T dot = (pr * dr).sum();
        dr = pr * (dr - dot) * scale;
        std::fill(sc + r * m + len, sc + (r + 1) * m, T(0));
        std::fill(dsc + r * m + len, dsc + (r + 1) * m, T(0));
      }
      dv.topRows(m).noalias() += p.transpose() * dy.middleRows(i0, n);
      dq.middleRows(i0, n).noalias() = ds * k.topRows(m);
      dk.topRows(m).noalias() += ds.transpose() * q.middleRows(i0, n);
    }
  }
}

template void attention_forward<float>(float*, float*, const float*, float*, int, const AttentionShape&);
template void attention_forward<double>(double*, double*, const double*, double*, int, const AttentionShape&);
template void attention_decode<float>(float*, float*, const float*, const float*, int64_t, int64_t, int64_t);
template void attention_decode<double>(double*, double*, const double*, const double*, int64_t, int64_t, int64_t);
template void attention_backward<float>(float*, const float*, const float*, const float*, float*, int,
                                        const AttentionShape&);
template void attention_backward<double>(double*, const double*, const double*, const double*, double*, int,
                                         const AttentionShape&);

}  // namespace gpt::cpu
