// Matrix products of the CUDA backend through cuBLASLt (contract of
// linear_forward/linear_backward: model/cpu/matmul.hpp).
//
// Precision: bf16 inputs and outputs with fp32 accumulation
// (CUBLAS_COMPUTE_32F) in bf16 mode; plain fp32 (no TF32) in fp32 mode, so
// fp32 runs agree with the CPU reference to rounding.
//
// Fusions in the cuBLASLt epilogue: bias add (BIAS), bias + GELU that also
// stores the pre-activation for backward (GELU_AUX_BIAS), and the GELU
// gradient applied to the input gradient (DGELU). When cuBLASLt offers no
// algorithm for a fused epilogue on some shape or alignment, the same result
// is computed with a plain GEMM and the GELU kernel (gelu.hpp); tests run
// both paths. Before its first fused GELU in a type, the Matmul checks that
// cuBLASLt's epilogues compute GPT-2's tanh GELU (gelu_epilogue_check.hpp)
// and fuses only if they do; the verdict is logged once.
//
// Descriptors, layouts and the chosen algorithm are cached per shape (and
// pointer alignment class): after the first step no descriptor is built.
// Bias gradients are column sums in a fixed order (deterministic), added to
// the gradient (+=) as every backward here does; or, with
// set_bias_grad_epilogue, cuBLASLt's BGRADB epilogue of the dW product.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <type_traits>
#include <vector>

#include "core/cuda/device_memory.hpp"
#include "model/cuda/cublaslt_api.hpp"
#include "model/cuda/gelu_epilogue_check.hpp"
#include "model/cuda/types.hpp"

namespace gpt::cuda {

class Matmul {
 public:
  // Workspace and scratch come from `alloc` (counted as scratch).
  explicit Matmul(DeviceAllocator* alloc, size_t workspace_bytes = size_t(32) << 20);
  ~Matmul();
  Matmul(const Matmul&) = delete;
  Matmul& operator=(const Matmul&) = delete;

  // out[N, OC] = inp[N, C] W[OC, C]^T (+ bias). With gelu_out non-null, out
  // holds the pre-activation and gelu_out[N, OC] = GELU(out).
  template <typename T>
  void linear_forward(T* out, const T* inp, const T* w, const T* bias, int64_t N, int64_t C, int64_t OC,
                      cudaStream_t s, T* gelu_out = nullptr);

  // out[N, OC] = inp W^T + bias + residual[N, OC]: the residual add of a
  // transformer block fused into the GEMM (cuBLASLt's beta * C term).
  template <typename T>
  void linear_residual_forward(T* out, const T* inp, const T* w, const T* bias, const T* residual, int64_t N,
                               int64_t C, int64_t OC, cudaStream_t s);

  // dinp[N, C] = dout W (then multiplied by GELU'(gelu_pre) when gelu_pre,
  // the [N, C] pre-activation of inp, is given); dw[OC, C] += dout^T inp;
  // dbias[OC] += column sums of dout. dinp, dw or dbias may be null.
  template <typename T>
  void linear_backward(T* dinp, T* dw, T* dbias, const T* dout, const T* inp, const T* w, int64_t N, int64_t C,
                       int64_t OC, cudaStream_t s, const T* gelu_pre = nullptr);

  // Tests: turn the fused epilogues off to check the fallback path.
  void set_fusion(bool on) { fusion_ = on; }

  // Bias gradients in the dW product's epilogue (cuBLASLt's BGRADB, as
  // Transformer Engine takes them) instead of bias_grad's kernel, which
  // reads dout once more: on an H100 at gpt2-124m, B=16, that kernel is 48
  // launches and 1.49 ms of a 32.35 ms step. Off by default until a GPU measures whether the epilogue slows
  // the dW products by less (bench_gpu_train --bias-grad-epilogue). The
  // epilogue overwrites a vector of D's type, so it writes a scratch vector
  // that one small kernel adds into dbias in fp32 (in bf16 one rounding more
  // than the kernel's fp32 sums: the sum is rounded to bf16 first), and
  // its summation order is cuBLASLt's. Before its first use in a type, a
  // product of small integers (exact in bf16 and fp32, whatever the order)
  // checks that the epilogue writes the column sums of dout, and that dW is
  // as without it; otherwise, or where cuBLASLt has no algorithm for it or
  // refuses a call of it, the kernel runs. The verdict is logged once.
  void set_bias_grad_epilogue(bool on) { bias_epilogue_ = on; }
  enum class BiasGradCheck { kNotRun, kExact, kDiffers, kNoAlgorithm };
  template <typename T>
  BiasGradCheck bias_grad_check() const {
    return bias_check_[std::is_same_v<T, float> ? 0 : 1];
  }
  // How many bias gradients the epilogue computed so far (the check's not counted).
  int64_t epilogue_bias_grads() const { return epilogue_bias_grads_; }
  // How many GEMMs took the fused-GELU epilogue / the fallback so far.
  int64_t fused_gelu_calls() const { return fused_calls_; }
  int64_t unfused_gelu_calls() const { return unfused_calls_; }
  size_t cached_plans() const { return plans_.size(); }

  // GEMM autotuning (off by default: 0 or 1 takes cuBLASLt's heuristic's
  // first pick, as PyTorch does). With candidates > 1, each new shape asks
  // the heuristic for up to that many algorithms and, at its first call,
  // times each on the call's own operands (one warm-up and kTuneRuns timed
  // runs, events on the call's stream, one host wait per candidate), then
  // keeps the fastest for good. Only the first step pays: the hot loop
  // after it is unchanged. A product that accumulates in place (dW += ...)
  // is timed into a scratch copy of its output, so the trials leave every
  // result as the chosen algorithm alone would. Algorithms may differ in
  // summation order (split-K), so two tuned runs can differ in the last
  // bits where the timing picks differently: like cudnn.benchmark.
  void set_autotune(int candidates) { autotune_ = candidates; }
  struct TuneResult {
    int64_t m, n, k;
    int epilogue;          // Epi in matmul.cpp: 0 none, 1 bias, 2 GELU aux, 3 DGELU
    int candidates;        // algorithms the heuristic returned
    int timed;             // of those, how many ran (the library may refuse some)
    int picked;            // index of the fastest in the heuristic's order (0: its own first pick)
    float first_ms, best_ms;  // per call: the heuristic's first pick, the fastest
  };
  const std::vector<TuneResult>& tune_results() const { return tune_results_; }
  static constexpr int kTuneRuns = 3;
  // The GELU epilogue check's verdict for storage type T (kNotRun until the
  // first fused GELU in T asks for it).
  template <typename T>
  const GeluEpilogueCheck& gelu_check() const {
    return gelu_check_[std::is_same_v<T, float> ? 0 : 1];
  }

  struct Plan;  // cached descriptors + algorithm (matmul.cpp)

 private:
  // Column-major D[m, n] = op(A) op(B) + beta Cm (Cm: same layout as D,
  // may be D itself) with an epilogue. Returns false (nothing launched) when
  // a GELU or bias-gradient epilogue has no algorithm; throws for the plain
  // ones. `bias`: the epilogue's vector (BGRADB writes it).
  template <typename T>
  bool gemm(bool transa, bool transb, int64_t m, int64_t n, int64_t k, const T* A, int64_t lda, const T* B,
            int64_t ldb, const T* Cm, T* D, int64_t ldd, float beta, const T* bias, int epilogue, const T* aux,
            int64_t aux_ld, cudaStream_t s);
  // Whether the fused GELU path may be used in T: runs the epilogue check on
  // stream s the first time (one small product each way and one host wait,
  // during the first step), then answers from its verdict.
  template <typename T>
  bool gelu_fusion_ok(cudaStream_t s);
  template <typename T>
  GeluEpilogueCheck run_gelu_check(cudaStream_t s);
  template <typename T>
  void bias_grad(T* dbias, const T* dout, int64_t N, int64_t OC, cudaStream_t s);
  // dW += inp^T dout and dbias += dout's column sums through the BGRADB
  // epilogue; false (nothing launched) where it may not or cannot run.
  template <typename T>
  bool dw_with_bias_epilogue(T* dw, T* dbias, const T* dout, const T* inp, int64_t N, int64_t C, int64_t OC,
                             cudaStream_t s);
  // Whether the epilogue may be used in T: runs its check on stream s the
  // first time (one host wait, during the first step), then answers from
  // the verdict (as gelu_fusion_ok).
  template <typename T>
  bool bias_epilogue_ok(cudaStream_t s);
  template <typename T>
  BiasGradCheck run_bias_grad_check(cudaStream_t s);
  // The epilogue's vector of n elements of T (the scratch buffer's start,
  // 256-byte aligned); grows during the first step only.
  template <typename T>
  T* bias_epilogue_vector(int64_t n);
  // Times the plan's candidates on this call's operands and keeps the
  // fastest in p.algo (set_autotune).
  template <typename T>
  void tune(Plan& p, int64_t m, int64_t n, int64_t k, int epilogue, const T* A, const T* B, const T* Cm, T* D,
            int64_t ldd, float beta, cudaStream_t s);

  const CublasLtApi& lt_;  // opened by the first Matmul (cublaslt_api.hpp)
  DeviceAllocator* alloc_;
  cublasLtHandle_t handle_ = nullptr;
  DeviceBuffer<char> workspace_;
  DeviceBuffer<float> bias_scratch_;
  DeviceBuffer<unsigned> bias_arrivals_;  // bias_grad's counters: zero between calls
  std::map<std::array<int64_t, 16>, std::unique_ptr<Plan>> plans_;
  bool fusion_ = true;
  std::array<GeluEpilogueCheck, 2> gelu_check_;  // fp32, bf16
  bool checking_ = false;                        // inside run_gelu_check: fuse as asked
  bool bias_epilogue_ = false;
  std::array<BiasGradCheck, 2> bias_check_{};  // fp32, bf16
  bool checking_bias_ = false;                 // inside run_bias_grad_check: use the epilogue
  DeviceBuffer<char> bias_epilogue_out_;       // the epilogue's bias-gradient vector
  int64_t epilogue_bias_grads_ = 0;
  int64_t fused_calls_ = 0, unfused_calls_ = 0;
  int autotune_ = 0;
  std::vector<TuneResult> tune_results_;
};

}  // namespace gpt::cuda
