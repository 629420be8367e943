// Error checks for CUDA runtime and cuBLASLt calls in the CUDA backend. A
// failed call throws gpt::Error naming the statement, the error and file:line
// (the apps turn it into one 'error:' line and every rank exits).
//
// Kernel launches are checked with GPT_CUDA_LAUNCHED() (cudaGetLastError):
// launch-configuration errors surface at the call; faults inside a kernel
// surface at the next synchronising call, like every CUDA program.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <string>

namespace gpt::cuda {

[[noreturn]] void throw_cuda_error(const char* what, const char* stmt, const char* file, int line);
// Names the status through the opened cuBLASLt (cublaslt_api.hpp).
[[noreturn]] void throw_cublas_error(cublasStatus_t status, const char* stmt, const char* file, int line);
// Throws gpt::Error(message). CUDA sources report through these two rather
// than fmt: nvcc cannot compile fmt's C++20 consteval format checks.
[[noreturn]] void throw_error(const std::string& message);

}  // namespace gpt::cuda

#define GPT_CUDA_OK(stmt)                                                                              \
  do {                                                                                                 \
    cudaError_t e_ = (stmt);                                                                           \
    if (e_ != cudaSuccess) ::gpt::cuda::throw_cuda_error(cudaGetErrorString(e_), #stmt, __FILE__, __LINE__); \
  } while (0)

#define GPT_CUBLAS_OK(stmt)                                                                                 \
  do {                                                                                                      \
    cublasStatus_t s_ = (stmt);                                                                             \
    if (s_ != CUBLAS_STATUS_SUCCESS) ::gpt::cuda::throw_cublas_error(s_, #stmt, __FILE__, __LINE__);        \
  } while (0)

#define GPT_CUDA_LAUNCHED() GPT_CUDA_OK(cudaGetLastError())
