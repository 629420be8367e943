// Matmul (matmul.hpp): host code driving cuBLASLt; the only kernels it
// launches are GELU's (gelu.hpp) and the bias gradient's (bias_grad.hpp).
#include <algorithm>
#include <deque>
#include <string>
#include <type_traits>
#include <vector>

#include "core/cuda/host_wait.hpp"
#include "core/logging.hpp"
#include "model/cuda/bias_grad.hpp"
#include "model/cuda/check.hpp"
#include "model/cuda/elementwise.hpp"
#include "model/cuda/gelu.hpp"
#include "model/cuda/matmul.hpp"

namespace gpt::cuda {
namespace {

enum Epi : int { kNone = 0, kBias = 1, kGeluAux = 2, kDGelu = 3, kBGradB = 4 };
// Epilogues with a fallback: where cuBLASLt has no algorithm, the caller computes the same another way.
bool may_fall_back(int e) { return e == kGeluAux || e == kDGelu || e == kBGradB; }

template <typename T>
constexpr cudaDataType_t data_type() {
  return std::is_same_v<T, float> ? CUDA_R_32F : CUDA_R_16BF;
}

int64_t alignment(const void* p) {
  if (!p) return 256;
  const auto a = reinterpret_cast<uintptr_t>(p);
  return int64_t(std::min<uintptr_t>(256, a & (~a + 1)));
}

// A check's transfers on stream s: host copies in T kept alive (a deque:
// earlier elements stay where they are) until the check has waited for s,
// so one wait covers every transfer.
template <typename T>
class Staging {
 public:
  Staging(DeviceAllocator* alloc, cudaStream_t s) : alloc_(alloc), s_(s) {}
  void copy_to(T* dst, const std::vector<float>& v) {
    const std::vector<T>& t = staged_.emplace_back(v.begin(), v.end());
    GPT_CUDA_OK(cudaMemcpyAsync(dst, t.data(), t.size() * sizeof(T), cudaMemcpyHostToDevice, s_));
  }
  DeviceBuffer<T> upload(const std::vector<float>& v) {
    DeviceBuffer<T> d(v.size(), MemCategory::kScratch, alloc_, false);
    copy_to(d.data(), v);
    return d;
  }
  // The host copy of d, valid once the check has waited for s.
  const std::vector<T>* download(const DeviceBuffer<T>& d) {
    std::vector<T>& t = staged_.emplace_back(d.size());
    GPT_CUDA_OK(cudaMemcpyAsync(t.data(), d.data(), t.size() * sizeof(T), cudaMemcpyDeviceToHost, s_));
    return &t;
  }

 private:
  DeviceAllocator* alloc_;
  cudaStream_t s_;
  std::deque<std::vector<T>> staged_;
};

}  // namespace

struct Matmul::Plan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
  cublasLtMatmulAlgo_t algo{};
  bool ok = false;
  std::vector<cublasLtMatmulAlgo_t> candidates;  // set_autotune: to be timed at the first call
  ~Plan() {
    const CublasLtApi& lt = cublaslt();
    if (desc) lt.matmul_desc_destroy(desc);
    if (a) lt.matrix_layout_destroy(a);
    if (b) lt.matrix_layout_destroy(b);
    if (d) lt.matrix_layout_destroy(d);
  }
};

Matmul::Matmul(DeviceAllocator* alloc, size_t workspace_bytes) : lt_(cublaslt()), alloc_(alloc) {
  GPT_CUBLAS_OK(lt_.create(&handle_));
  workspace_ = DeviceBuffer<char>(workspace_bytes, MemCategory::kScratch, alloc_);
}

Matmul::~Matmul() {
  plans_.clear();
  if (handle_) lt_.destroy(handle_);
}

template <typename T>
bool Matmul::gemm(bool transa, bool transb, int64_t m, int64_t n, int64_t k, const T* A, int64_t lda, const T* B,
                  int64_t ldb, const T* Cm, T* D, int64_t ldd, float beta, const T* bias, int epilogue,
                  const T* aux, int64_t aux_ld, cudaStream_t s) {
  const bool has_bias = bias != nullptr;
  const std::array<int64_t, 16> key{int64_t(data_type<T>()), transa, transb, m, n, k, lda, ldb, ldd, has_bias,
                                    epilogue, aux_ld, alignment(A), alignment(B), std::min(alignment(D), alignment(Cm)),
                                    std::min(alignment(bias), alignment(aux))};
  std::unique_ptr<Plan>& slot = plans_[key];
  if (!slot) {
    auto p = std::make_unique<Plan>();
    const cudaDataType_t dt = data_type<T>();
    GPT_CUBLAS_OK(lt_.matmul_desc_create(&p->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    const cublasOperation_t ta = transa ? CUBLAS_OP_T : CUBLAS_OP_N, tb = transb ? CUBLAS_OP_T : CUBLAS_OP_N;
    GPT_CUBLAS_OK(lt_.matmul_desc_set_attribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
    GPT_CUBLAS_OK(lt_.matmul_desc_set_attribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
    cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_DEFAULT;
    if (epilogue == kBias) epi = CUBLASLT_EPILOGUE_BIAS;
    if (epilogue == kGeluAux) epi = has_bias ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS : CUBLASLT_EPILOGUE_GELU_AUX;
    if (epilogue == kDGelu) epi = CUBLASLT_EPILOGUE_DGELU;
    if (epilogue == kBGradB) epi = CUBLASLT_EPILOGUE_BGRADB;
    GPT_CUBLAS_OK(lt_.matmul_desc_set_attribute(p->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi));
    if (has_bias) {
      GPT_CUBLAS_OK(lt_.matmul_desc_set_attribute(p->desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &dt, sizeof dt));
    }
    if (epilogue == kGeluAux || epilogue == kDGelu) {
      GPT_CUBLAS_OK(
          lt_.matmul_desc_set_attribute(p->desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &aux_ld, sizeof aux_ld));
    }
    GPT_CUBLAS_OK(lt_.matrix_layout_create(&p->a, dt, transa ? k : m, transa ? m : k, lda));
    GPT_CUBLAS_OK(lt_.matrix_layout_create(&p->b, dt, transb ? n : k, transb ? k : n, ldb));
    GPT_CUBLAS_OK(lt_.matrix_layout_create(&p->d, dt, m, n, ldd));

    cublasLtMatmulPreference_t pref = nullptr;
    GPT_CUBLAS_OK(lt_.matmul_preference_create(&pref));
    const uint64_t ws = workspace_.bytes();
    lt_.matmul_preference_set_attribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws);
    const uint32_t al_a = uint32_t(key[12]), al_b = uint32_t(key[13]), al_d = uint32_t(key[14]);
    lt_.matmul_preference_set_attribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &al_a, sizeof al_a);
    lt_.matmul_preference_set_attribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &al_b, sizeof al_b);
    lt_.matmul_preference_set_attribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &al_d, sizeof al_d);
    lt_.matmul_preference_set_attribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &al_d, sizeof al_d);
    std::vector<cublasLtMatmulHeuristicResult_t> results(size_t(std::max(1, autotune_)));
    int found = 0;
    const cublasStatus_t st = lt_.matmul_algo_get_heuristic(handle_, p->desc, p->a, p->b, p->d, p->d, pref,
                                                            int(results.size()), results.data(), &found);
    lt_.matmul_preference_destroy(pref);
    p->ok = st == CUBLAS_STATUS_SUCCESS && found > 0;
    if (p->ok) p->algo = results[0].algo;
    if (p->ok && found > 1)
      for (int i = 0; i < found; ++i)
        if (results[size_t(i)].state == CUBLAS_STATUS_SUCCESS) p->candidates.push_back(results[size_t(i)].algo);
    slot = std::move(p);
  }
  Plan& p = *slot;
  if (!p.ok) {
    if (may_fall_back(epilogue)) return false;  // the caller falls back
    throw_error(std::string("cuBLASLt has no algorithm for a ") + (std::is_same_v<T, float> ? "fp32" : "bf16") +
                " GEMM m=" + std::to_string(m) + " n=" + std::to_string(n) + " k=" + std::to_string(k));
  }
  // Pointers are per call; setting them on the cached descriptor is cheap.
  if (has_bias) {
    const void* bp = bias;
    GPT_CUBLAS_OK(lt_.matmul_desc_set_attribute(p.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bp, sizeof bp));
  }
  if (epilogue == kGeluAux || epilogue == kDGelu) {
    const void* ap = aux;
    GPT_CUBLAS_OK(lt_.matmul_desc_set_attribute(p.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &ap, sizeof ap));
  }
  if (!p.candidates.empty()) tune(p, m, n, k, epilogue, A, B, Cm, D, ldd, beta, s);
  const float alpha = 1.f;
  const cublasStatus_t st = lt_.matmul(handle_, p.desc, &alpha, A, p.a, B, p.b, &beta, Cm ? Cm : D, p.d, D, p.d,
                                           &p.algo, workspace_.data(), workspace_.bytes(), s);
  // A heuristic's pick the library then refuses: use the fallback from now on. The bias-gradient epilogue (opt-in,
  // not yet run on every GPU) falls back on a refusal of its arguments too, rather than ending the run.
  if (may_fall_back(epilogue) &&
      (st == CUBLAS_STATUS_NOT_SUPPORTED || (epilogue == kBGradB && st == CUBLAS_STATUS_INVALID_VALUE))) {
    p.ok = false;
    return false;
  }
  GPT_CUBLAS_OK(st);
  return true;
}

template <typename T>
void Matmul::tune(Plan& p, int64_t m, int64_t n, int64_t k, int epilogue, const T* A, const T* B, const T* Cm, T* D,
                  int64_t ldd, float beta, cudaStream_t s) {
  std::vector<cublasLtMatmulAlgo_t> candidates = std::move(p.candidates);
  p.candidates.clear();
  // The trials write D (and a GELU epilogue's aux), which the real call
  // then writes again, unless D is also the input C (beta != 0 in place):
  // then they write a zeroed scratch copy instead.
  const bool in_place = beta != 0.f && (!Cm || Cm == D);
  DeviceBuffer<T> scratch;
  if (in_place) scratch = DeviceBuffer<T>(size_t(ldd) * size_t(n), MemCategory::kScratch, alloc_);
  T* d = in_place ? scratch.data() : D;
  const T* c = in_place ? scratch.data() : (Cm ? Cm : D);
  cudaEvent_t start = nullptr, stop = nullptr;
  GPT_CUDA_OK(cudaEventCreate(&start));
  GPT_CUDA_OK(cudaEventCreate(&stop));
  const float alpha = 1.f;
  auto run = [&](const cublasLtMatmulAlgo_t& algo) {
    return lt_.matmul(handle_, p.desc, &alpha, A, p.a, B, p.b, &beta, c, p.d, d, p.d, &algo, workspace_.data(),
                      workspace_.bytes(), s);
  };
  TuneResult r{m, n, k, epilogue, int(candidates.size()), 0, -1, -1.f, -1.f};
  for (size_t i = 0; i < candidates.size(); ++i) {
    if (run(candidates[i]) != CUBLAS_STATUS_SUCCESS) continue;  // refused at run time: not a candidate
    GPT_CUDA_OK(cudaEventRecord(start, s));
    bool ok = true;
    for (int rep = 0; rep < kTuneRuns && ok; ++rep) ok = run(candidates[i]) == CUBLAS_STATUS_SUCCESS;
    GPT_CUDA_OK(cudaEventRecord(stop, s));
    wait_stream(s, "GEMM autotune");  // bounded like every host wait of a run (host_wait.hpp)
    if (!ok) continue;
    float ms = 0;
    GPT_CUDA_OK(cudaEventElapsedTime(&ms, start, stop));
    ms /= kTuneRuns;
    ++r.timed;
    if (i == 0) r.first_ms = ms;
    if (r.picked < 0 || ms < r.best_ms) {
      r.picked = int(i);
      r.best_ms = ms;
      p.algo = candidates[i];
    }
  }
  GPT_CUDA_OK(cudaEventDestroy(start));
  GPT_CUDA_OK(cudaEventDestroy(stop));
  tune_results_.push_back(r);  // the stream is idle: the scratch output may be freed
  spdlog::debug("GEMM autotune m={} n={} k={} epilogue {}: {} of {} algorithms ran, picked #{} ({:.4f} ms; the "
                "heuristic's first {:.4f} ms)",
                m, n, k, epilogue, r.timed, r.candidates, r.picked, r.best_ms, r.first_ms);
}

// Row-major products mapped onto column-major cuBLASLt: a row-major [R, K]
// matrix is a column-major [K, R] one with leading dimension K.
template <typename T>
void Matmul::linear_forward(T* out, const T* inp, const T* w, const T* bias, int64_t N, int64_t C, int64_t OC,
                            cudaStream_t s, T* gelu_out) {
  // out^T[OC, N] = W[OC, C] (col-major view of W^T, transposed) x inp^T[C, N].
  if (gelu_out) {
    // Fused: D = GELU(x W^T + b) into gelu_out, pre-activation into `out` (aux).
    if (fusion_ && gelu_fusion_ok<T>(s) &&
        gemm<T>(true, false, OC, N, C, w, C, inp, C, nullptr, gelu_out, OC, 0.f, bias, kGeluAux, out, OC, s)) {
      ++fused_calls_;
      return;
    }
    ++unfused_calls_;
  }
  gemm<T>(true, false, OC, N, C, w, C, inp, C, nullptr, out, OC, 0.f, bias, bias ? kBias : kNone, nullptr, 0, s);
  if (gelu_out) gelu_forward(gelu_out, out, N * OC, s);
}

template <typename T>
void Matmul::linear_residual_forward(T* out, const T* inp, const T* w, const T* bias, const T* residual, int64_t N,
                                     int64_t C, int64_t OC, cudaStream_t s) {
  gemm<T>(true, false, OC, N, C, w, C, inp, C, residual, out, OC, 1.f, bias, bias ? kBias : kNone, nullptr, 0, s);
}

template <typename T>
void Matmul::linear_backward(T* dinp, T* dw, T* dbias, const T* dout, const T* inp, const T* w, int64_t N, int64_t C,
                             int64_t OC, cudaStream_t s, const T* gelu_pre) {
  if (dinp) {
    // dinp^T[C, N] = W^T[C, OC] x dout^T[OC, N].
    bool done = false;
    if (gelu_pre && fusion_ && gelu_fusion_ok<T>(s)) {
      done = gemm<T>(false, false, C, N, OC, w, C, dout, OC, nullptr, dinp, C, 0.f, nullptr, kDGelu, gelu_pre, C, s);
      if (done) ++fused_calls_;
    }
    if (!done) {
      gemm<T>(false, false, C, N, OC, w, C, dout, OC, nullptr, dinp, C, 0.f, nullptr, kNone, nullptr, 0, s);
      if (gelu_pre) {
        ++unfused_calls_;
        gelu_backward(dinp, gelu_pre, dinp, N * C, s);
      }
    }
  }
  if (dw && dbias && dw_with_bias_epilogue(dw, dbias, dout, inp, N, C, OC, s)) return;
  if (dw) {
    // dW^T[C, OC] += inp^T[C, N] x dout[N, OC].
    gemm<T>(false, true, C, OC, N, inp, C, dout, OC, dw, dw, C, 1.f, nullptr, kNone, nullptr, 0, s);
  }
  if (dbias) bias_grad(dbias, dout, N, OC, s);
}

template <typename T>
bool Matmul::dw_with_bias_epilogue(T* dw, T* dbias, const T* dout, const T* inp, int64_t N, int64_t C, int64_t OC,
                                   cudaStream_t s) {
  if (!bias_epilogue_ || !fusion_ || !bias_epilogue_ok<T>(s)) return false;
  T* g = bias_epilogue_vector<T>(OC);
  // dW^T[C, OC] += inp^T[C, N] x dout[N, OC]; BGRADB: g = the column sums of op(B) = dout[N, OC] over k = N.
  if (!gemm<T>(false, true, C, OC, N, inp, C, dout, OC, dw, dw, C, 1.f, g, kBGradB, nullptr, 0, s)) return false;
  accumulate(dbias, static_cast<const T*>(g), OC, s);
  ++epilogue_bias_grads_;
  return true;
}

template <typename T>
bool Matmul::bias_epilogue_ok(cudaStream_t s) {
  if (checking_bias_) return true;
  BiasGradCheck& c = bias_check_[std::is_same_v<T, float> ? 0 : 1];
  if (c == BiasGradCheck::kNotRun) {
    c = run_bias_grad_check<T>(s);
    if (is_log_rank()) {
      const char* type = std::is_same_v<T, float> ? "fp32" : "bf16";
      if (c == BiasGradCheck::kExact)
        spdlog::info("bias gradients ({}): cuBLASLt's BGRADB epilogue in the dW products (checked exact on a "
                     "64x64x64 product)", type);
      else
        spdlog::warn("bias gradients ({}): our kernel, as cuBLASLt's BGRADB epilogue {}", type,
                     c == BiasGradCheck::kNoAlgorithm ? "has no algorithm at the check's shape"
                                                      : "did not give dout's column sums at the check's shape");
    }
  }
  return c == BiasGradCheck::kExact;
}

template <typename T>
T* Matmul::bias_epilogue_vector(int64_t n) {
  const size_t bytes = size_t(n) * sizeof(T);
  if (bias_epilogue_out_.size() < bytes) bias_epilogue_out_ = DeviceBuffer<char>(bytes, MemCategory::kScratch, alloc_);
  return reinterpret_cast<T*>(bias_epilogue_out_.data());
}

// dW and dbias of a product whose every value is a small integer (and 1/2 in
// dbias), so that any summation order gives them exactly, in bf16 as in fp32:
// N = C = OC = 64, inp and dout in {-1, 0, 1}, dout's first column all ones
// (its sum 64), dbias starting at 1/2 (the epilogue must add, through the
// scratch, not overwrite dbias), the scratch at 1000 (the epilogue must
// overwrite it) and dW at 1 (the product accumulates).
template <typename T>
Matmul::BiasGradCheck Matmul::run_bias_grad_check(cudaStream_t s) {
  constexpr int64_t R = 64;
  std::vector<float> inp(size_t(R * R)), dout(size_t(R * R)), dw0(size_t(R * R), 1.f), db0(size_t(R), 0.5f);
  for (int64_t n = 0; n < R; ++n)
    for (int64_t j = 0; j < R; ++j) {
      inp[size_t(n * R + j)] = float((n * 5 + j * 3 + (n * j) % 7) % 3) - 1;
      dout[size_t(n * R + j)] = j == 0 ? 1.f : float((n * 11 + j * 7 + (n * j) % 5) % 3) - 1;
    }
  std::vector<double> want_dw(dw0.begin(), dw0.end()), want_db(db0.begin(), db0.end());
  for (int64_t n = 0; n < R; ++n)
    for (int64_t j = 0; j < R; ++j) {
      want_db[size_t(j)] += dout[size_t(n * R + j)];
      for (int64_t c = 0; c < R; ++c)
        want_dw[size_t(j * R + c)] += double(dout[size_t(n * R + j)]) * inp[size_t(n * R + c)];
    }
  Staging<T> io(alloc_, s);
  const DeviceBuffer<T> d_inp = io.upload(inp), d_dout = io.upload(dout);
  DeviceBuffer<T> d_dw = io.upload(dw0), d_db = io.upload(db0);
  // The epilogue's vector starts at 1000, which an epilogue that added to it would keep.
  io.copy_to(bias_epilogue_vector<T>(R), std::vector<float>(size_t(R), 1000.f));
  const int64_t before = epilogue_bias_grads_;
  checking_bias_ = true;
  struct Restore {
    Matmul* m;
    int64_t count;
    ~Restore() { m->checking_bias_ = false, m->epilogue_bias_grads_ = count; }
  } restore{this, before};
  const bool ran = dw_with_bias_epilogue<T>(d_dw.data(), d_db.data(), d_dout.data(), d_inp.data(), R, R, R, s);
  const std::vector<T>*h_dw = io.download(d_dw), *h_db = io.download(d_db);
  wait_stream(s, "bias-gradient epilogue check");  // the check's one host wait, bounded
  if (!ran) return BiasGradCheck::kNoAlgorithm;
  for (size_t i = 0; i < want_db.size(); ++i)
    if (double(float((*h_db)[i])) != want_db[i]) return BiasGradCheck::kDiffers;
  for (size_t i = 0; i < want_dw.size(); ++i)
    if (double(float((*h_dw)[i])) != want_dw[i]) return BiasGradCheck::kDiffers;
  return BiasGradCheck::kExact;
}

template <typename T>
bool Matmul::gelu_fusion_ok(cudaStream_t s) {
  if (checking_) return true;
  constexpr bool is_bf16 = !std::is_same_v<T, float>;
  GeluEpilogueCheck& c = gelu_check_[is_bf16];
  if (c.result == GeluEpilogueCheck::Result::kNotRun) {
    c = run_gelu_check<T>(s);
    if (is_log_rank()) {
      if (c.result == GeluEpilogueCheck::Result::kMatches)
        spdlog::info("{}", describe(c, is_bf16));
      else
        spdlog::warn("{}", describe(c, is_bf16));
    }
  }
  return c.result == GeluEpilogueCheck::Result::kMatches;
}

// Both GELU products through the public entry points, so the check runs the
// exact path training takes (descriptors, epilogue, aux layout), at shapes
// whose products are exact: every row of the result is the sweep x.
template <typename T>
GeluEpilogueCheck Matmul::run_gelu_check(cudaStream_t s) {
  const std::vector<float> x = gelu_check_inputs();
  // R rows (tokens) of X values, inner dimension R: 384 x 64 x 64 products,
  // tile-sized and 256-byte aligned, so a library that fuses GELU at the
  // model's shapes has an algorithm for these too.
  const int64_t X = int64_t(x.size()), R = 64;
  // Forward, as the MLP's first layer: pre[R, X] = inp[R, R] W[X, R]^T + b
  // with inp's first column ones (the rest zero), W's first column x - b and
  // b alternately 0 and 1/2.
  std::vector<float> inp(static_cast<size_t>(R * R)), w(static_cast<size_t>(X * R)), b(x.size());
  for (int64_t r = 0; r < R; ++r) inp[size_t(r * R)] = 1;
  for (int64_t o = 0; o < X; ++o) {
    b[size_t(o)] = float(o % 2) / 2;
    w[size_t(o * R)] = x[size_t(o)] - b[size_t(o)];
  }
  // Backward, as the MLP's projection: dinp[R, X] = (dout[R, R] W2[R, X]) *
  // GELU'(pre) with dout's first column and W2's first row ones: dout W2 = 1.
  std::vector<float> w2(static_cast<size_t>(R * X)), x_rows(static_cast<size_t>(R * X));
  for (int64_t c = 0; c < X; ++c) w2[size_t(c)] = 1;
  for (int64_t i = 0; i < R * X; ++i) x_rows[size_t(i)] = x[size_t(i % X)];
  Staging<T> io(alloc_, s);
  auto widened = [](const std::vector<T>* t) { return std::vector<float>(t->begin(), t->end()); };
  // inp doubles as dout: the same first-column ones.
  const DeviceBuffer<T> d_inp = io.upload(inp), d_w = io.upload(w), d_b = io.upload(b), d_w2 = io.upload(w2),
                        d_pre_in = io.upload(x_rows);
  DeviceBuffer<T> pre(size_t(R * X), MemCategory::kScratch, alloc_), act(size_t(R * X), MemCategory::kScratch, alloc_),
      dinp(size_t(R * X), MemCategory::kScratch, alloc_);
  const int64_t fused_before = fused_calls_, unfused_before = unfused_calls_;
  checking_ = true;
  struct Restore {
    Matmul* m;
    int64_t fused, unfused;
    ~Restore() { m->checking_ = false, m->fused_calls_ = fused, m->unfused_calls_ = unfused; }
  } restore{this, fused_before, unfused_before};
  linear_forward<T>(pre.data(), d_inp.data(), d_w.data(), d_b.data(), R, R, X, s, act.data());
  const bool forward_fused = fused_calls_ == fused_before + 1;
  linear_backward<T>(dinp.data(), nullptr, nullptr, d_inp.data(), nullptr, d_w2.data(), R, X, R, s, d_pre_in.data());
  const bool backward_fused = fused_calls_ == fused_before + 2;
  const std::vector<T>*h_pre = io.download(pre), *h_act = io.download(act), *h_dinp = io.download(dinp);
  // The check's one host wait. Bounded: s may wait for a collective (the
  // first product of a ZeRO-3 run waits for its all-gather).
  wait_stream(s, "GELU epilogue check");
  if (!forward_fused || !backward_fused) {
    GeluEpilogueCheck c;
    c.result = GeluEpilogueCheck::Result::kNoAlgorithm;
    return c;
  }
  return judge_gelu_epilogue(x_rows, widened(h_pre), widened(h_act), widened(h_dinp), !std::is_same_v<T, float>);
}

template <typename T>
void Matmul::bias_grad(T* dbias, const T* dout, int64_t N, int64_t OC, cudaStream_t s) {
  // Both grow during the first step only (shapes repeat).
  const int64_t need = bias_grad_scratch(N, OC), counters = bias_grad_arrivals(OC);
  if (int64_t(bias_scratch_.size()) < need)
    bias_scratch_ = DeviceBuffer<float>(size_t(need), MemCategory::kScratch, alloc_);
  if (int64_t(bias_arrivals_.size()) < counters) {
    bias_arrivals_ = DeviceBuffer<unsigned>(size_t(counters), MemCategory::kScratch, alloc_);
    GPT_CUDA_OK(cudaMemsetAsync(bias_arrivals_.data(), 0, bias_arrivals_.size() * sizeof(unsigned), s));
  }
  cuda::bias_grad(dbias, dout, bias_scratch_.data(), bias_arrivals_.data(), N, OC, s);
}

#define GPT_INSTANTIATE(T)                                                                                     \
  template void Matmul::linear_forward<T>(T*, const T*, const T*, const T*, int64_t, int64_t, int64_t,        \
                                          cudaStream_t, T*);                                                   \
  template void Matmul::linear_residual_forward<T>(T*, const T*, const T*, const T*, const T*, int64_t, int64_t, \
                                                   int64_t, cudaStream_t);                                     \
  template void Matmul::linear_backward<T>(T*, T*, T*, const T*, const T*, const T*, int64_t, int64_t, int64_t, \
                                           cudaStream_t, const T*);
GPT_INSTANTIATE(float)
GPT_INSTANTIATE(bf16)
#undef GPT_INSTANTIATE

}  // namespace gpt::cuda
