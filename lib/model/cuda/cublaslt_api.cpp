// cuBLASLt opened on first use (cublaslt_api.hpp).
#include "model/cuda/cublaslt_api.hpp"

#include <dlfcn.h>
#include <fmt/format.h>

#include <atomic>

#include "core/error.hpp"

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

// Resolves `name` in `lib` into `fn`, or says which entry point is missing.
template <typename Fn>
void resolve(void* lib, const std::string& path, const char* name, Fn& fn) {
  dlerror();
  void* sym = dlsym(lib, name);
  if (!sym) {
    const char* why = dlerror();
    throw Error(fmt::format("{} has no {} ({}): it is not the cuBLASLt {} the program was built for", path, name,
                            why ? why : "null symbol", CUBLAS_VER_MAJOR));
  }
  fn = reinterpret_cast<Fn>(sym);
}

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
  std::string tried;
  for (const std::string& path : candidates) {
    // RTLD_LOCAL: nothing else in the process binds to its symbols.
    void* lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
      const char* why = dlerror();
      tried += fmt::format("{}{}", tried.empty() ? "" : "; ", why ? why : path);
      continue;
    }
    CublasLtApi api;
    try {
      resolve(lib, path, "cublasLtGetVersion", api.get_version);
      resolve(lib, path, "cublasLtGetStatusString", api.get_status_string);
      resolve(lib, path, "cublasLtCreate", api.create);
      resolve(lib, path, "cublasLtDestroy", api.destroy);
      resolve(lib, path, "cublasLtMatmulDescCreate", api.matmul_desc_create);
      resolve(lib, path, "cublasLtMatmulDescDestroy", api.matmul_desc_destroy);
      resolve(lib, path, "cublasLtMatmulDescSetAttribute", api.matmul_desc_set_attribute);
      resolve(lib, path, "cublasLtMatrixLayoutCreate", api.matrix_layout_create);
      resolve(lib, path, "cublasLtMatrixLayoutDestroy", api.matrix_layout_destroy);
      resolve(lib, path, "cublasLtMatmulPreferenceCreate", api.matmul_preference_create);
      resolve(lib, path, "cublasLtMatmulPreferenceDestroy", api.matmul_preference_destroy);
      resolve(lib, path, "cublasLtMatmulPreferenceSetAttribute", api.matmul_preference_set_attribute);
      resolve(lib, path, "cublasLtMatmulAlgoGetHeuristic", api.matmul_algo_get_heuristic);
      resolve(lib, path, "cublasLtMatmul", api.matmul);
    } catch (...) {
      dlclose(lib);
      throw;
    }
    api.path = path;
    // The library stays open for the life of the process (its handles may be
    // destroyed as late as static destruction).
    return api;
  }
  throw Error(fmt::format("cannot open cuBLASLt, which --device cuda needs: {} (add the CUDA toolkit's library "
                          "directory to LD_LIBRARY_PATH)",
                          tried.empty() ? "no candidate file names" : tried));
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
