// Which library runs the CPU's large fp32 matrix products: the linear
// layers' (forward and both backward products) and the LM head's, and the
// GEMM peak that MFU divides by. Eigen's GEMM is threaded by the ranks'
// OpenMP threads; OpenBLAS's sgemm, single-threaded, ran 1.23x Eigen's
// (102 against 83 GFLOP/s at 1024^3) and a 2-rank, 1-thread ddp step
// 1.19-1.43x faster on an AVX-512 machine, while with two threads its own thread pool
// fights OpenMP's for the cores (README, Performance). So by default a rank
// of one thread uses OpenBLAS and a rank of several uses Eigen. The small
// products inside OpenMP regions (attention's, per (batch, head)) and the
// fp64 ones (the tests' references) stay Eigen's.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <type_traits>

namespace gpt::cpu {

enum class CpuGemm { kAuto, kEigen, kOpenBlas };

// Whether this build links OpenBLAS (GPT_HAVE_OPENBLAS).
bool have_openblas();

// Process-wide, set at start-up before any product (gpt_train's
// --cpu-gemm). kOpenBlas without OpenBLAS built in throws
// std::invalid_argument. OpenBLAS runs as many threads as OpenMP would
// (omp_get_max_threads(), set before this call).
void set_cpu_gemm(CpuGemm g);

// Whether the fp32 products use OpenBLAS now: kOpenBlas, or kAuto with one
// OpenMP thread and OpenBLAS built in.
bool use_openblas();

// "openblas" or "eigen": what use_openblas() says, for logs and metrics.
std::string cpu_gemm_name();

// C = op(A) op(B) + beta C, row-major, op(A) M x K, op(B) K x N, C M x N,
// through OpenBLAS (cblas_sgemm); beta 0 overwrites C. Only where
// use_openblas().
void openblas_sgemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, const float* A, int64_t lda,
                    const float* B, int64_t ldb, float beta, float* C, int64_t ldc);

// Whether a product of T goes to OpenBLAS: fp32 where use_openblas().
template <typename T>
bool fp32_openblas() {
  if constexpr (std::is_same_v<T, float>)
    return use_openblas();
  else
    return false;
}

// openblas_sgemm for the products of T where fp32_openblas<T>(), so that
// one template body holds both libraries' calls; never called for other T.
template <typename T>
void openblas_gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, const T* A, int64_t lda, const T* B,
                   int64_t ldb, float beta, T* C, int64_t ldc) {
  if constexpr (std::is_same_v<T, float>)
    openblas_sgemm(trans_a, trans_b, M, N, K, A, lda, B, ldb, beta, C, ldc);
  else
    throw std::logic_error("openblas_gemm: fp32 only");
}

}  // namespace gpt::cpu
