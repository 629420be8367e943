// The CPU's flash-style attention (model/cpu/attention.cpp: query blocks,
// probabilities recomputed in backward from the saved log-sum-exp) against
// the textbook definition computed directly in double with the T x T
// probabilities kept: output, log-sum-exp and every input gradient. T
// covers one row, a partial block, exactly one block, one row past it, and
// several blocks with a partial last one.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include <Eigen/Core>

#include "model/cpu/attention.hpp"

namespace gpt {
namespace {

struct Reference {
  std::vector<double> out, lse, dqkv;
};

// out_i = sum_j p_ij v_j with p_ij = softmax_j(scale q_i . k_j) over j <= i;
// dv_j = sum_i p_ij dy_i; ds_ij = p_ij (dy_i . v_j - sum_k p_ik dy_i . v_k);
// dq_i = scale sum_j ds_ij k_j; dk_j = scale sum_i ds_ij q_i.
Reference reference(const std::vector<double>& qkv, const std::vector<double>& dy, const cpu::AttentionShape& s) {
  const int64_t T = s.T, C = s.C, hs = C / s.NH;
  const double scale = 1.0 / std::sqrt(double(hs));
  Reference r{std::vector<double>(size_t(s.B * T * C)), std::vector<double>(size_t(s.B * s.NH * T)),
              std::vector<double>(qkv.size())};
  auto q = [&](int64_t b, int64_t t, int64_t h) { return size_t((b * T + t) * 3 * C + h * hs); };
  for (int64_t b = 0; b < s.B; ++b)
    for (int64_t h = 0; h < s.NH; ++h) {
      std::vector<double> p(size_t(T * T), 0.0);
      for (int64_t i = 0; i < T; ++i) {
        double mx = -1e300;
        for (int64_t j = 0; j <= i; ++j) {
          double d = 0;
          for (int64_t e = 0; e < hs; ++e) d += qkv[q(b, i, h) + e] * qkv[q(b, j, h) + C + e];
          p[size_t(i * T + j)] = scale * d;
          mx = std::max(mx, scale * d);
        }
        double sum = 0;
        for (int64_t j = 0; j <= i; ++j) sum += std::exp(p[size_t(i * T + j)] - mx);
        for (int64_t j = 0; j <= i; ++j) p[size_t(i * T + j)] = std::exp(p[size_t(i * T + j)] - mx) / sum;
        r.lse[size_t((b * s.NH + h) * T + i)] = mx + std::log(sum);
        for (int64_t e = 0; e < hs; ++e) {
          double o = 0;
          for (int64_t j = 0; j <= i; ++j) o += p[size_t(i * T + j)] * qkv[q(b, j, h) + 2 * C + e];
          r.out[size_t((b * T + i) * C + h * hs + e)] = o;
        }
      }
      for (int64_t i = 0; i < T; ++i) {
        const double* g = dy.data() + (b * T + i) * C + h * hs;
        std::vector<double> dp(size_t(i + 1));
        double dot = 0;
        for (int64_t j = 0; j <= i; ++j) {
          for (int64_t e = 0; e < hs; ++e) dp[size_t(j)] += g[e] * qkv[q(b, j, h) + 2 * C + e];
          dot += p[size_t(i * T + j)] * dp[size_t(j)];
        }
        for (int64_t j = 0; j <= i; ++j) {
          const double pij = p[size_t(i * T + j)], ds = pij * (dp[size_t(j)] - dot);
          for (int64_t e = 0; e < hs; ++e) {
            r.dqkv[q(b, j, h) + 2 * C + e] += pij * g[e];
            r.dqkv[q(b, i, h) + e] += scale * ds * qkv[q(b, j, h) + C + e];
            r.dqkv[q(b, j, h) + C + e] += scale * ds * qkv[q(b, i, h) + e];
          }
        }
      }
    }
  return r;
}

double rel_error(const std::vector<double>& got, const std::vector<double>& want) {
  double e = 0, n = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    e += (got[i] - want[i]) * (got[i] - want[i]);
    n += want[i] * want[i];
  }
  return std::sqrt(e / n);
}

template <typename T>
void run(const std::vector<double>& qkv_d, const std::vector<double>& dy_d, const cpu::AttentionShape& s,
         std::vector<T>& out, std::vector<T>& lse, std::vector<T>& dqkv) {
  const std::vector<T> qkv(qkv_d.begin(), qkv_d.end()), dy(dy_d.begin(), dy_d.end());
  const int threads = omp_get_max_threads();
  // 64-byte aligned, as the model's buffers are (the op's contract for
  // results independent of the thread count).
  std::vector<T, Eigen::aligned_allocator<T>> scratch(size_t(cpu::attention_scratch_per_thread(s.T) * threads));
  out.assign(size_t(s.B * s.T * s.C), T(0));
  lse.assign(size_t(s.B * s.NH * s.T), T(0));
  dqkv.assign(qkv.size(), T(7));  // overwritten, not accumulated into
  cpu::attention_forward(out.data(), lse.data(), qkv.data(), scratch.data(), threads, s);
  cpu::attention_backward(dqkv.data(), dy.data(), qkv.data(), lse.data(), scratch.data(), threads, s);
}

void inputs(const cpu::AttentionShape& s, std::vector<double>& qkv, std::vector<double>& dy) {
  std::mt19937_64 rng(uint64_t(s.T * 7 + s.NH));
  std::normal_distribution<double> nd(0.0, 1.0);
  qkv.resize(size_t(s.B * s.T * 3 * s.C));
  dy.resize(size_t(s.B * s.T * s.C));
  for (double& x : qkv) x = 1.5 * nd(rng);  // scores of a few units: peaked rows
  for (double& x : dy) x = nd(rng);
}

TEST(CpuAttention, EqualsTheDefinitionInDoubleAndFloat) {
  for (int64_t T : {1, 37, 64, 65, 150}) {
    SCOPED_TRACE(::testing::Message() << "T=" << T);
    const cpu::AttentionShape s{2, T, 16, 2};  // head size 8
    std::vector<double> qkv, dy;
    inputs(s, qkv, dy);
    const Reference ref = reference(qkv, dy, s);
    std::vector<double> out, lse, dqkv;
    run(qkv, dy, s, out, lse, dqkv);
    EXPECT_LE(rel_error(out, ref.out), 1e-13);
    EXPECT_LE(rel_error(lse, ref.lse), 1e-13);
    EXPECT_LE(rel_error(dqkv, ref.dqkv), 1e-12);
    // float: rounding only (2^-24 per operation over sums of up to ~150 terms).
    std::vector<float> outf, lsef, dqkvf;
    run(qkv, dy, s, outf, lsef, dqkvf);
    EXPECT_LE(rel_error({outf.begin(), outf.end()}, ref.out), 1e-5);
    EXPECT_LE(rel_error({lsef.begin(), lsef.end()}, ref.lse), 1e-5);
    EXPECT_LE(rel_error({dqkvf.begin(), dqkvf.end()}, ref.dqkv), 1e-5);
  }
}

// A block of queries is computed by the same calls whichever thread takes
// it, and every thread's scratch is aligned alike, so the thread count
// changes nothing, bit for bit: 1 and 2 threads deal the 8 (batch, head)
// pairs out whole, 3 and 16 split them into query blocks (forward). T = 37: a
// scratch of 2 x 37 x 37 elements per thread would misalign the second
// thread's; 150 has several blocks.
TEST(CpuAttention, ThreadCountChangesNothing) {
  for (int64_t T : {37, 150}) {
    const cpu::AttentionShape s{2, T, 32, 4};
    std::vector<double> qkv, dy;
    inputs(s, qkv, dy);
    const int threads = omp_get_max_threads();
    omp_set_num_threads(1);
    std::vector<float> out1, lse1, d1;
    run(qkv, dy, s, out1, lse1, d1);
    for (int n : {2, 3, 16}) {
      SCOPED_TRACE(::testing::Message() << "T=" << T << ", " << n << " threads");
      std::vector<float> out2, lse2, d2;
      omp_set_num_threads(n);
      run(qkv, dy, s, out2, lse2, d2);
      EXPECT_EQ(out1, out2);
      EXPECT_EQ(lse1, lse2);
      EXPECT_EQ(d1, d2);
    }
    omp_set_num_threads(threads);
  }
}

}  // namespace
}  // namespace gpt
