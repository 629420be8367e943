// The cuBLASLt entry points the backend calls (matmul.cpp), resolved when the
// first Matmul is made rather than when the process starts.
//
// Why not link libcublasLt: it is 540 MB with about 400,000 relocations, and
// the dynamic loader processes them in every process that links it, whether
// or not it multiplies on a GPU: about 0.4 s of CPU and 190 MB resident (90
// MB of it private) per process (bench/process_start.sh). gpt_train is one binary
// for both devices, so a --device cpu rank, the planner and every test paid
// that. Now only a process that makes a Matmul opens the library: dlopen of
// "libcublasLt.so.<major of the headers we compiled against>", through the
// usual search (LD_LIBRARY_PATH, the runpath, ld.so.cache), then in the
// directory CMake found it in at build time.
//
// The emulated backend (tests/unit/host_cuda) defines the same functions in
// the test binary; built with GPT_CUBLASLT_LINKED, the table points at the
// linked definitions instead and nothing is opened.
#pragma once

#include <cublasLt.h>

#include <string>
#include <vector>

namespace gpt::cuda {

struct CublasLtApi {
  decltype(&::cublasLtGetVersion) get_version;
  decltype(&::cublasLtGetStatusString) get_status_string;
  decltype(&::cublasLtCreate) create;
  decltype(&::cublasLtDestroy) destroy;
  decltype(&::cublasLtMatmulDescCreate) matmul_desc_create;
  decltype(&::cublasLtMatmulDescDestroy) matmul_desc_destroy;
  decltype(&::cublasLtMatmulDescSetAttribute) matmul_desc_set_attribute;
  decltype(&::cublasLtMatrixLayoutCreate) matrix_layout_create;
  decltype(&::cublasLtMatrixLayoutDestroy) matrix_layout_destroy;
  decltype(&::cublasLtMatmulPreferenceCreate) matmul_preference_create;
  decltype(&::cublasLtMatmulPreferenceDestroy) matmul_preference_destroy;
  decltype(&::cublasLtMatmulPreferenceSetAttribute) matmul_preference_set_attribute;
  decltype(&::cublasLtMatmulAlgoGetHeuristic) matmul_algo_get_heuristic;
  decltype(&::cublasLtMatmul) matmul;
  std::string path;  // the file it came from ("linked" for GPT_CUBLASLT_LINKED)
};

// The process's table; opens the library on the first call (thread-safe).
// Throws gpt::Error naming the library and the loader's reason when no
// candidate opens or one lacks an entry point.
const CublasLtApi& cublaslt();

// Whether cublaslt() has opened the library in this process.
bool cublaslt_opened();

// The file names cublaslt() tries, in order.
std::vector<std::string> cublaslt_candidates();

// Opens the first of `candidates` that loads and resolves every entry point
// (what cublaslt() does once). Exposed for the loader's tests.
CublasLtApi open_cublaslt(const std::vector<std::string>& candidates);

}  // namespace gpt::cuda
