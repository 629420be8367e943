// cuBLASLt opened on first use (cublaslt_api.hpp).
#include "model/cuda/cublaslt_api.hpp"

#include <fmt/format.h>

#include <atomic>

#include "core/error.hpp"
#include "core/shared_library.hpp"

#define GPT_STR_(x) #x
#define GPT_STR(x) GPT_STR_(x)

namespace gpt::cuda {
namespace {

std::atomic<bool> g_opened{false};

#ifdef GPT_CUBLASLT_LINKED
CublasLtApi linked_api() {
  return {&::cublasLtGetVersion,
          &::cublasLtGetStatusString,
          &::cublasLtCreate,
          &::cublasLtDestroy,
          &::cublasLtMatmulDescCreate,
          &::cublasLtMatmulDescDestroy,
          &::cublasLtMatmulDescSetAttribute,
          &::cublasLtMatrixLayoutCreate,
          &::cublasLtMatrixLayoutDestroy,
          &::cublasLtMatmulPreferenceCreate,
          &::cublasLtMatmulPreferenceDestroy,
          &::cublasLtMatmulPreferenceSetAttribute,
          &::cublasLtMatmulAlgoGetHeuristic,
          &::cublasLtMatmul,
          "linked"};
}
#endif

}  // namespace

std::vector<std::string> cublaslt_candidates() {
  const std::string file = "libcublasLt.so." GPT_STR(CUBLAS_VER_MAJOR);
  std::vector<std::string> out{file};
#ifdef GPT_CUBLASLT_DIR
  out.push_back(std::string(GPT_CUBLASLT_DIR) + "/" + file);
#endif
  return out;
}

CublasLtApi open_cublaslt(const std::vector<std::string>& candidates) {
  SharedLibrary lib = open_first_library(candidates, "cuBLASLt, which --device cuda needs",
                                         "add the CUDA toolkit's library directory to LD_LIBRARY_PATH");
  const std::string mismatch = fmt::format("it is not the cuBLASLt {} the program was built for", CUBLAS_VER_MAJOR);
  CublasLtApi api;
  try {
    resolve_symbol(lib, "cublasLtGetVersion", api.get_version, mismatch);
    resolve_symbol(lib, "cublasLtGetStatusString", api.get_status_string, mismatch);
    resolve_symbol(lib, "cublasLtCreate", api.create, mismatch);
    resolve_symbol(lib, "cublasLtDestroy", api.destroy, mismatch);
    resolve_symbol(lib, "cublasLtMatmulDescCreate", api.matmul_desc_create, mismatch);
    resolve_symbol(lib, "cublasLtMatmulDescDestroy", api.matmul_desc_destroy, mismatch);
    resolve_symbol(lib, "cublasLtMatmulDescSetAttribute", api.matmul_desc_set_attribute, mismatch);
    resolve_symbol(lib, "cublasLtMatrixLayoutCreate", api.matrix_layout_create, mismatch);
    resolve_symbol(lib, "cublasLtMatrixLayoutDestroy", api.matrix_layout_destroy, mismatch);
    resolve_symbol(lib, "cublasLtMatmulPreferenceCreate", api.matmul_preference_create, mismatch);
    resolve_symbol(lib, "cublasLtMatmulPreferenceDestroy", api.matmul_preference_destroy, mismatch);
    resolve_symbol(lib, "cublasLtMatmulPreferenceSetAttribute", api.matmul_preference_set_attribute, mismatch);
    resolve_symbol(lib, "cublasLtMatmulAlgoGetHeuristic", api.matmul_algo_get_heuristic, mismatch);
    resolve_symbol(lib, "cublasLtMatmul", api.matmul, mismatch);
  } catch (...) {
    close_library(lib);
    throw;
  }
  api.path = lib.path;
  // The library stays open for the life of the process (its handles may be
  // destroyed as late as static destruction).
  return api;
}

const CublasLtApi& cublaslt() {
#ifdef GPT_CUBLASLT_LINKED
  static const CublasLtApi api = linked_api();
#else
  static const CublasLtApi api = open_cublaslt(cublaslt_candidates());
#endif
  g_opened.store(true, std::memory_order_relaxed);
  return api;
}

bool cublaslt_opened() { return g_opened.load(std::memory_order_relaxed); }

}  // namespace gpt::cuda
