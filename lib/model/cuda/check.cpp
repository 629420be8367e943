#include "model/cuda/check.hpp"

#include <fmt/format.h>

#include "core/error.hpp"
#include "model/cuda/cublaslt_api.hpp"

namespace gpt::cuda {

void throw_cuda_error(const char* what, const char* stmt, const char* file, int line) {
  throw Error(fmt::format("{} failed: {} at {}:{}", stmt, what, file, line));
}

void throw_cublas_error(cublasStatus_t status, const char* stmt, const char* file, int line) {
  throw_cuda_error(cublaslt().get_status_string(status), stmt, file, line);
}

void throw_error(const std::string& message) { throw Error(message); }

}  // namespace gpt::cuda
