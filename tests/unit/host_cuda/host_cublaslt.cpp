// Host cuBLASLt (see host_cublaslt.hpp).
#include "host_cublaslt.hpp"

#include <cublasLt.h>
#include <cuda_bf16.h>

#include <Eigen/Core>

#include "api_log.hpp"
#include "host_streams.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace host_cublaslt {

int default_algorithms() {
  const char* v = std::getenv("GPT_HOST_CUBLASLT_ALGORITHMS");
  return v && std::atoi(v) > 0 ? std::atoi(v) : 1;
}

Hooks& hooks() {
  static Hooks h;
  return h;
}

namespace {

struct Desc {
  cublasComputeType_t compute;
  cudaDataType_t scale;
  int32_t transa = CUBLAS_OP_N, transb = CUBLAS_OP_N;
  uint32_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  const void* bias = nullptr;
  int32_t bias_type = -1;  // -1: D's type
  const void* aux = nullptr;
  int64_t aux_ld = 0;
};
struct Layout {
  cudaDataType_t type;
  uint64_t rows, cols;
  int64_t ld;
};
struct Preference {
  uint64_t workspace = 0;
};

Desc* desc(cublasLtMatmulDesc_t d) { return reinterpret_cast<Desc*>(d); }
Layout* layout(cublasLtMatrixLayout_t l) { return reinterpret_cast<Layout*>(l); }

bool is_gelu(uint32_t e) {
  return e == CUBLASLT_EPILOGUE_GELU_AUX || e == CUBLASLT_EPILOGUE_GELU_AUX_BIAS || e == CUBLASLT_EPILOGUE_DGELU;
}
// Epilogues that add the bias vector to D, and those that have one (BGRADB writes it).
bool adds_bias(uint32_t e) { return e == CUBLASLT_EPILOGUE_BIAS || e == CUBLASLT_EPILOGUE_GELU_AUX_BIAS; }
bool has_bias(uint32_t e) { return adds_bias(e) || e == CUBLASLT_EPILOGUE_BGRADB; }

// The checks cuBLASLt makes of a problem (its documented requirements).
cublasStatus_t validate(const Desc& d, const Layout& a, const Layout& b, const Layout& c, const Layout& dl) {
  if (d.compute != CUBLAS_COMPUTE_32F || d.scale != CUDA_R_32F) return CUBLAS_STATUS_NOT_SUPPORTED;
  if (a.type != dl.type || b.type != dl.type || c.type != dl.type) return CUBLAS_STATUS_NOT_SUPPORTED;
  if (dl.type != CUDA_R_32F && dl.type != CUDA_R_16BF) return CUBLAS_STATUS_NOT_SUPPORTED;
  const uint64_t m = dl.rows, n = dl.cols;
  const bool ta = d.transa == CUBLAS_OP_T, tb = d.transb == CUBLAS_OP_T;
  const uint64_t am = ta ? a.cols : a.rows, k = ta ? a.rows : a.cols;
  const uint64_t bk = tb ? b.cols : b.rows, bn = tb ? b.rows : b.cols;
  if (am != m || bk != k || bn != n || c.rows != m || c.cols != n) return CUBLAS_STATUS_INVALID_VALUE;
  for (const Layout* l : {&a, &b, &c, &dl})
    if (l->ld < int64_t(l->rows)) return CUBLAS_STATUS_INVALID_VALUE;
  switch (d.epilogue) {
    case CUBLASLT_EPILOGUE_DEFAULT:
    case CUBLASLT_EPILOGUE_BIAS:
    case CUBLASLT_EPILOGUE_GELU_AUX:
    case CUBLASLT_EPILOGUE_GELU_AUX_BIAS:
    case CUBLASLT_EPILOGUE_DGELU:
    case CUBLASLT_EPILOGUE_BGRADB:
      break;
    default:
      return CUBLAS_STATUS_NOT_SUPPORTED;
  }
  if (has_bias(d.epilogue) && d.bias_type != -1 && d.bias_type != int32_t(dl.type)) return CUBLAS_STATUS_NOT_SUPPORTED;
  if (is_gelu(d.epilogue) && (d.aux_ld % 8 != 0 || d.aux_ld < int64_t(m))) return CUBLAS_STATUS_INVALID_VALUE;
  return CUBLAS_STATUS_SUCCESS;
}

double load(const void* p, cudaDataType_t t, int64_t i) {
  if (t == CUDA_R_32F) return static_cast<const float*>(p)[i];
  return __bfloat162float(static_cast<const __nv_bfloat16*>(p)[i]);
}
void put(void* p, cudaDataType_t t, int64_t i, double v) {
  if (t == CUDA_R_32F)
    static_cast<float*>(p)[i] = float(v);
  else
    static_cast<__nv_bfloat16*>(p)[i] = __float2bfloat16_rn(float(v));
}
// What the stored value of v is (rounded to t).
double stored(cudaDataType_t t, double v) {
  return t == CUDA_R_32F ? double(float(v)) : double(__bfloat162float(__float2bfloat16_rn(float(v))));
}

constexpr double kSqrt2OverPi = 0.7978845608028654, kCoeff = 0.044715;
double gelu(double x) {
  switch (hooks().gelu) {
    case GeluFormula::kErf:
      return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0)));
    case GeluFormula::kSigmoid:
      return x / (1 + std::exp(-1.702 * x));
    case GeluFormula::kTanh:
      break;
  }
  return 0.5 * x * (1 + std::tanh(kSqrt2OverPi * (x + kCoeff * x * x * x)));
}
double gelu_grad(double x) {
  switch (hooks().dgelu) {
    case GeluFormula::kErf:
      return 0.5 * (1 + std::erf(x / std::sqrt(2.0))) + x * std::exp(-0.5 * x * x) / std::sqrt(2 * M_PI);
    case GeluFormula::kSigmoid: {
      const double s = 1 / (1 + std::exp(-1.702 * x));
      return s + 1.702 * x * s * (1 - s);
    }
    case GeluFormula::kTanh:
      break;
  }
  const double th = std::tanh(kSqrt2OverPi * (x + kCoeff * x * x * x));
  return 0.5 * (1 + th) + 0.5 * x * (1 - th * th) * kSqrt2OverPi * (1 + 3 * kCoeff * x * x);
}

template <typename V>
cublasStatus_t set(V& field, const void* buf, size_t size) {
  if (!buf || size != sizeof(V)) return CUBLAS_STATUS_INVALID_VALUE;
  std::memcpy(&field, buf, sizeof(V));
  return CUBLAS_STATUS_SUCCESS;
}

// D = alpha op(A) op(B) + beta C with d's epilogue, for a validated problem.
void product(const Desc& d, const Layout& la, const Layout& lb, const Layout& lc, const Layout& ld, float alpha,
             const void* A, const void* B, float beta, const void* C, void* D) {
  const bool ta = d.transa == CUBLAS_OP_T, tb = d.transb == CUBLAS_OP_T;
  const int64_t m = int64_t(ld.rows), n = int64_t(ld.cols), k = int64_t(ta ? la.rows : la.cols);
  // op(X)[r, c] of a column-major X with leading dimension ldx, widened to
  // double; the product in double (Eigen), so the only roundings are the
  // inputs' and the output's, as with fp32 accumulation to within its error.
  auto op = [](const void* X, const Layout& l, bool t, int64_t rows, int64_t cols) {
    Eigen::MatrixXd M(rows, cols);
    for (int64_t c = 0; c < cols; ++c)
      for (int64_t r = 0; r < rows; ++r) M(r, c) = t ? load(X, l.type, c + r * l.ld) : load(X, l.type, r + c * l.ld);
    return M;
  };
  // C may be D itself (in place): compute into a copy first.
  const Eigen::MatrixXd opA = op(A, la, ta, m, k), opB = op(B, lb, tb, k, n);
  const Eigen::MatrixXd S = opA * opB;
  if (d.epilogue == CUBLASLT_EPILOGUE_BGRADB)  // the bias gradient: op(B) summed over k, one per column of D
    for (int64_t j = 0; j < n; ++j) {
      const double sum = hooks().bgradb_sums_a ? opA.row(j % m).sum() : opB.col(j).sum();
      put(const_cast<void*>(d.bias), ld.type, j, sum + (hooks().bgradb_adds ? load(d.bias, ld.type, j) : 0.0));
    }
  std::vector<double> out(size_t(m * n));
  for (int64_t j = 0; j < n; ++j)
    for (int64_t i = 0; i < m; ++i) {
      double x = alpha * S(i, j);
      if (beta != 0.f) x += beta * load(C, lc.type, i + j * lc.ld);
      if (adds_bias(d.epilogue)) x += load(d.bias, ld.type, i);
      if (d.epilogue == CUBLASLT_EPILOGUE_GELU_AUX || d.epilogue == CUBLASLT_EPILOGUE_GELU_AUX_BIAS) {
        put(const_cast<void*>(d.aux), ld.type, i + j * d.aux_ld, x);
        x = gelu(stored(ld.type, x));
      } else if (d.epilogue == CUBLASLT_EPILOGUE_DGELU) {
        x *= gelu_grad(load(d.aux, ld.type, i + j * d.aux_ld));
      }
      out[size_t(i + j * m)] = x;
    }
  for (int64_t j = 0; j < n; ++j)
    for (int64_t i = 0; i < m; ++i) put(D, ld.type, i + j * ld.ld, out[size_t(i + j * m)]);
}

}  // namespace
}  // namespace host_cublaslt

using namespace host_cublaslt;

cublasStatus_t cublasLtCreate(cublasLtHandle_t* handle) {
  static int token;
  *handle = reinterpret_cast<cublasLtHandle_t>(&token);
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtDestroy(cublasLtHandle_t) { return CUBLAS_STATUS_SUCCESS; }

size_t cublasLtGetVersion() { return CUBLAS_VERSION; }

const char* cublasLtGetStatusString(cublasStatus_t s) {
  switch (s) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
    default: return "CUBLAS_STATUS (other)";
  }
}

cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t* d, cublasComputeType_t compute, cudaDataType_t scale) {
  host_cuda::count_call("create.matmul_desc");
  *d = reinterpret_cast<cublasLtMatmulDesc_t>(new Desc{compute, scale});
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t d) {
  host_cuda::count_call("destroy.matmul_desc");
  delete desc(d);
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t dh, cublasLtMatmulDescAttributes_t attr,
                                              const void* buf, size_t size) {
  Desc& d = *desc(dh);
  switch (attr) {
    case CUBLASLT_MATMUL_DESC_TRANSA: return set(d.transa, buf, size);
    case CUBLASLT_MATMUL_DESC_TRANSB: return set(d.transb, buf, size);
    case CUBLASLT_MATMUL_DESC_EPILOGUE: return set(d.epilogue, buf, size);
    case CUBLASLT_MATMUL_DESC_BIAS_POINTER: return set(d.bias, buf, size);
    case CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE: return set(d.bias_type, buf, size);
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER: return set(d.aux, buf, size);
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD: return set(d.aux_ld, buf, size);
    default: return CUBLAS_STATUS_NOT_SUPPORTED;  // not modelled
  }
}

cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t* l, cudaDataType type, uint64_t rows, uint64_t cols,
                                          int64_t ld) {
  host_cuda::count_call("create.matrix_layout");
  *l = reinterpret_cast<cublasLtMatrixLayout_t>(new Layout{type, rows, cols, ld});
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t l) {
  host_cuda::count_call("destroy.matrix_layout");
  delete layout(l);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t* p) {
  host_cuda::count_call("create.matmul_preference");
  *p = reinterpret_cast<cublasLtMatmulPreference_t>(new Preference);
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t p) {
  host_cuda::count_call("destroy.matmul_preference");
  delete reinterpret_cast<Preference*>(p);
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t ph,
                                                    cublasLtMatmulPreferenceAttributes_t attr, const void* buf,
                                                    size_t size) {
  auto& p = *reinterpret_cast<Preference*>(ph);
  if (attr == CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES) return set(p.workspace, buf, size);
  uint32_t alignment = 0;  // the minimum alignments: accepted, not modelled
  return set(alignment, buf, size);
}

cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t, cublasLtMatmulDesc_t dh, cublasLtMatrixLayout_t a,
                                              cublasLtMatrixLayout_t b, cublasLtMatrixLayout_t c,
                                              cublasLtMatrixLayout_t d, cublasLtMatmulPreference_t,
                                              int requested, cublasLtMatmulHeuristicResult_t results[], int* found) {
  host_cuda::count_call("cublaslt.heuristic");
  ++hooks().heuristic_calls;
  *found = 0;
  if (requested < 1) return CUBLAS_STATUS_INVALID_VALUE;
  const cublasStatus_t st = validate(*desc(dh), *layout(a), *layout(b), *layout(c), *layout(d));
  if (st != CUBLAS_STATUS_SUCCESS) return st;
  if (is_gelu(desc(dh)->epilogue) && hooks().refuse_gelu_heuristic) return CUBLAS_STATUS_NOT_SUPPORTED;
  if (desc(dh)->epilogue == CUBLASLT_EPILOGUE_BGRADB && hooks().refuse_bgradb_heuristic)
    return CUBLAS_STATUS_NOT_SUPPORTED;
  *found = std::min(requested, std::max(1, hooks().algorithms));
  for (int i = 0; i < *found; ++i) {
    results[i] = cublasLtMatmulHeuristicResult_t{};
    results[i].algo.data[0] = 0x5eed;  // what cublasLtMatmul expects back
    results[i].algo.data[1] = uint64_t(i);
    results[i].state = CUBLAS_STATUS_SUCCESS;
  }
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmul(cublasLtHandle_t, cublasLtMatmulDesc_t dh, const void* alpha, const void* A,
                              cublasLtMatrixLayout_t al, const void* B, cublasLtMatrixLayout_t bl, const void* beta,
                              const void* C, cublasLtMatrixLayout_t cl, void* D, cublasLtMatrixLayout_t dl,
                              const cublasLtMatmulAlgo_t* algo, void*, size_t, cudaStream_t stream) {
  host_cuda::count_call("cublaslt.matmul");
  ++hooks().matmul_calls;
  const Desc& d = *desc(dh);
  const Layout &la = *layout(al), &lb = *layout(bl), &lc = *layout(cl), &ld = *layout(dl);
  if (const cublasStatus_t st = validate(d, la, lb, lc, ld); st != CUBLAS_STATUS_SUCCESS) return st;
  if (!algo || algo->data[0] != 0x5eed) return CUBLAS_STATUS_INVALID_VALUE;
  if (hooks().refuse_algorithm >= 0 && algo->data[1] == uint64_t(hooks().refuse_algorithm))
    return CUBLAS_STATUS_NOT_SUPPORTED;
  if (is_gelu(d.epilogue) && hooks().refuse_gelu_matmul) return CUBLAS_STATUS_NOT_SUPPORTED;
  if (d.epilogue == CUBLASLT_EPILOGUE_BGRADB && hooks().refuse_bgradb_matmul) return CUBLAS_STATUS_INVALID_VALUE;
  if (has_bias(d.epilogue) && !d.bias) return CUBLAS_STATUS_INVALID_VALUE;
  if (is_gelu(d.epilogue) && !d.aux) return CUBLAS_STATUS_INVALID_VALUE;
  // Checked now, computed when the stream gets to it, from what the call
  // passed: the descriptors' and scales' values as they are now (cuBLASLt
  // reads them at the call), the matrices as they are then.
  const float a = *static_cast<const float*>(alpha), b = *static_cast<const float*>(beta);
  host_cuda::enqueue(stream, [=] { product(d, la, lb, lc, ld, a, A, B, b, C, D); });
  return CUBLAS_STATUS_SUCCESS;
}
