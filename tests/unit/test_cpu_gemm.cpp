// model/cpu/gemm.hpp: the fp32 products through OpenBLAS (a rank of one
// thread, or --cpu-gemm openblas) equal the fp64 reference within fp32
// rounding, as Eigen's do: the linear layer's forward and both backward
// products (dW accumulated, not overwritten), and the LM head's logits and
// gradients over several chunks of rows. A transposed or misplaced
// argument (a wrong leading dimension, op or beta) is off by O(1). And
// which library auto picks, by the OpenMP team's size.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <random>
#include <vector>

#include "model/cpu/classifier.hpp"
#include "model/cpu/gemm.hpp"
#include "model/cpu/matmul.hpp"

namespace gpt {
namespace {

using cpu::CpuGemm;

// Restores auto (the default) after each test: the setting is process-wide.
class CpuGemmTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!cpu::have_openblas()) GTEST_SKIP() << "this build has no OpenBLAS (libopenblas-dev at configure time)";
  }
  void TearDown() override { cpu::set_cpu_gemm(CpuGemm::kAuto); }
};

std::vector<double> random_vec(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(-1, 1);
  std::vector<double> v(n);
  for (double& x : v) x = u(rng);
  return v;
}

std::vector<float> to_float(const std::vector<double>& v) { return {v.begin(), v.end()}; }

// max |got - want| / max |want|
double rel_err(const std::vector<float>& got, const std::vector<double>& want) {
  double e = 0, m = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    e = std::max(e, std::abs(double(got[i]) - want[i]));
    m = std::max(m, std::abs(want[i]));
  }
  return e / m;
}

// fp32 products of K-long sums of O(1) terms: a few ulps of the largest
// output times sqrt(K)-ish growth; 1e-5 is ~100 ulps, and any wrong
// operand gives O(1).
constexpr double kTol = 1e-5;

TEST_F(CpuGemmTest, LinearForwardAndBackwardMatchTheFp64Reference) {
  const int64_t N = 37, C = 48, OC = 80;
  const auto x = random_vec(size_t(N * C), 1), w = random_vec(size_t(OC * C), 2), b = random_vec(size_t(OC), 3);
  const auto dy = random_vec(size_t(N * OC), 4), dw0 = random_vec(size_t(OC * C), 5);
  std::vector<double> y(size_t(N * OC)), dx(size_t(N * C)), dw = dw0, db(size_t(OC), 0.0);
  cpu::linear_forward<double>(y.data(), x.data(), w.data(), b.data(), N, C, OC);
  cpu::linear_backward<double>(dx.data(), dw.data(), db.data(), dy.data(), x.data(), w.data(), N, C, OC);
  for (CpuGemm g : {CpuGemm::kOpenBlas, CpuGemm::kEigen}) {
    cpu::set_cpu_gemm(g);
    SCOPED_TRACE(cpu::cpu_gemm_name());
    ASSERT_EQ(cpu::use_openblas(), g == CpuGemm::kOpenBlas);
    const auto xf = to_float(x), wf = to_float(w), bf = to_float(b), dyf = to_float(dy);
    std::vector<float> yf(y.size()), dxf(dx.size()), dwf = to_float(dw0), dbf(db.size(), 0.f);
    cpu::linear_forward<float>(yf.data(), xf.data(), wf.data(), bf.data(), N, C, OC);
    cpu::linear_backward<float>(dxf.data(), dwf.data(), dbf.data(), dyf.data(), xf.data(), wf.data(), N, C, OC);
    EXPECT_LT(rel_err(yf, y), kTol);
    EXPECT_LT(rel_err(dxf, dx), kTol);
    EXPECT_LT(rel_err(dwf, dw), kTol);  // accumulated onto dw0
    EXPECT_LT(rel_err(dbf, db), kTol);
  }
}

TEST_F(CpuGemmTest, TheLmHeadMatchesTheFp64ReferenceOverChunks) {
  const cpu::ClassifierShape s{37, 48, 70, 80};
  const int64_t chunk = 16;  // three chunks, the last short
  const auto x = random_vec(size_t(s.N * s.C), 6), wte = random_vec(size_t(s.Vp * s.C), 7);
  const auto dwte0 = random_vec(size_t(s.Vp * s.C), 8);
  std::vector<int32_t> targets(size_t(s.N));
  for (int64_t i = 0; i < s.N; ++i) targets[size_t(i)] = int32_t((i * 13) % s.V);
  std::vector<double> losses(size_t(s.N)), logits(size_t(chunk * s.Vp)), dx(size_t(s.N * s.C)), dwte = dwte0;
  cpu::ClassifierArgs<double> a{x.data(), wte.data(), targets.data(), losses.data(),    logits.data(),
                                chunk,    dx.data(),  dwte.data(),    1.0 / double(s.N)};
  cpu::classifier_forward_backward<double>(a, s);
  for (CpuGemm g : {CpuGemm::kOpenBlas, CpuGemm::kEigen}) {
    cpu::set_cpu_gemm(g);
    SCOPED_TRACE(cpu::cpu_gemm_name());
    const auto xf = to_float(x), wf = to_float(wte);
    std::vector<float> lf(losses.size()), logf(logits.size()), dxf(dx.size()), dwf = to_float(dwte0);
    cpu::ClassifierArgs<float> af{xf.data(), wf.data(),  targets.data(), lf.data(),       logf.data(),
                                  chunk,     dxf.data(), dwf.data(),     1.f / float(s.N)};
    cpu::classifier_forward_backward<float>(af, s);
    EXPECT_LT(rel_err(lf, losses), kTol);
    EXPECT_LT(rel_err(dxf, dx), kTol);
    EXPECT_LT(rel_err(dwf, dwte), kTol);
  }
}

TEST_F(CpuGemmTest, AutoPicksOpenBlasForOneThreadOnly) {
  const int threads = omp_get_max_threads();
  cpu::set_cpu_gemm(CpuGemm::kAuto);
  omp_set_num_threads(1);
  EXPECT_TRUE(cpu::use_openblas());
  EXPECT_EQ(cpu::cpu_gemm_name(), "openblas");
  omp_set_num_threads(2);
  EXPECT_FALSE(cpu::use_openblas());
  EXPECT_EQ(cpu::cpu_gemm_name(), "eigen");
  cpu::set_cpu_gemm(CpuGemm::kEigen);
  omp_set_num_threads(1);
  EXPECT_FALSE(cpu::use_openblas());
  omp_set_num_threads(threads);
}

}  // namespace
}  // namespace gpt
