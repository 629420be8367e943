// cuDNN opened on first use (cudnn_api.hpp).
#include "model/cuda/cudnn_api.hpp"

#include <fmt/format.h>

#include "core/shared_library.hpp"

#define GPT_STR_(x) #x
#define GPT_STR(x) GPT_STR_(x)

namespace gpt::cuda {
namespace {

CudnnApi open_cudnn(const std::vector<std::string>& candidates) {
  SharedLibrary lib = open_first_library(candidates, "cuDNN, which cuDNN's attention needs",
                                         "add its library directory to LD_LIBRARY_PATH, e.g. PyTorch's "
                                         "nvidia/cudnn/lib");
  const std::string mismatch = fmt::format("it is not the cuDNN {} the program was built for", CUDNN_MAJOR);
  CudnnApi api;
  try {
    resolve_symbol(lib, "cudnnGetVersion", api.get_version, mismatch);
    resolve_symbol(lib, "cudnnGetErrorString", api.get_error_string, mismatch);
    resolve_symbol(lib, "cudnnGetLastErrorString", api.get_last_error_string, mismatch);
    resolve_symbol(lib, "cudnnCreate", api.create, mismatch);
    resolve_symbol(lib, "cudnnSetStream", api.set_stream, mismatch);
    resolve_symbol(lib, "cudnnBackendCreateDescriptor", api.create_descriptor, mismatch);
    resolve_symbol(lib, "cudnnBackendDestroyDescriptor", api.destroy_descriptor, mismatch);
    resolve_symbol(lib, "cudnnBackendSetAttribute", api.set_attribute, mismatch);
    resolve_symbol(lib, "cudnnBackendGetAttribute", api.get_attribute, mismatch);
    resolve_symbol(lib, "cudnnBackendFinalize", api.finalize, mismatch);
    resolve_symbol(lib, "cudnnBackendExecute", api.execute, mismatch);
  } catch (...) {
    close_library(lib);
    throw;
  }
  api.path = lib.path;
  return api;  // open for the life of the process, like cuBLASLt
}

}  // namespace

std::vector<std::string> cudnn_candidates() {
  const std::string file = "libcudnn.so." GPT_STR(CUDNN_MAJOR);
  std::vector<std::string> out{file};
#ifdef GPT_CUDNN_DIR
  out.push_back(std::string(GPT_CUDNN_DIR) + "/" + file);
#endif
  return out;
}

const CudnnApi& cudnn() {
  static const CudnnApi api = open_cudnn(cudnn_candidates());
  return api;
}

}  // namespace gpt::cuda
