#include "model/cpu/gemm.hpp"

#include <omp.h>

#include <atomic>
#include <climits>
#include <stdexcept>

#ifdef GPT_HAVE_OPENBLAS
#include <cblas.h>
#endif

namespace gpt::cpu {
namespace {
std::atomic<CpuGemm> g_gemm{CpuGemm::kAuto};
std::atomic<int> g_blas_threads{0};  // what OpenBLAS's pool was last set to (0: its own default)

void blas_threads(int n) {
#ifdef GPT_HAVE_OPENBLAS
  if (g_blas_threads.exchange(n, std::memory_order_relaxed) != n) openblas_set_num_threads(n);
#else
  (void)n;
#endif
}
}  // namespace

bool have_openblas() {
#ifdef GPT_HAVE_OPENBLAS
  return true;
#else
  return false;
#endif
}

void set_cpu_gemm(CpuGemm g) {
  if (g == CpuGemm::kOpenBlas && !have_openblas())
    throw std::invalid_argument(
        "cpu-gemm = 'openblas': this build has no OpenBLAS (libopenblas-dev at configure time)");
  g_gemm.store(g, std::memory_order_relaxed);
  if (g == CpuGemm::kOpenBlas) blas_threads(omp_get_max_threads());  // its own pool, as large as the OpenMP team
}

bool use_openblas() {
  switch (g_gemm.load(std::memory_order_relaxed)) {
    case CpuGemm::kEigen:
      return false;
    case CpuGemm::kOpenBlas:
      return true;
    case CpuGemm::kAuto:
      break;
  }
  if (!have_openblas() || omp_get_max_threads() != 1) return false;
  blas_threads(1);  // not its default, one per core
  return true;
}

std::string cpu_gemm_name() { return use_openblas() ? "openblas" : "eigen"; }

void openblas_sgemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, const float* A, int64_t lda,
                    const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
#ifdef GPT_HAVE_OPENBLAS
  // Debian's OpenBLAS takes int dimensions (not ILP64).
  for (int64_t d : {M, N, K, lda, ldb, ldc})
    if (d > INT_MAX) throw std::length_error("openblas_sgemm: a dimension over 2^31");
  if (M == 0 || N == 0) return;
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans, int(M), int(N),
              int(K), 1.f, A, int(lda), B, int(ldb), beta, C, int(ldc));
#else
  (void)trans_a, (void)trans_b, (void)M, (void)N, (void)K, (void)A, (void)lda, (void)B, (void)ldb, (void)beta, (void)C,
      (void)ldc;
  throw std::logic_error("openblas_sgemm: this build has no OpenBLAS");
#endif
}

}  // namespace gpt::cpu
