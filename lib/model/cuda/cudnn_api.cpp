// cuDNN opened on first use (cudnn_api.hpp).
#include "model/cuda/cudnn_api.hpp"

#include <dlfcn.h>
#include <fmt/format.h>

#include "core/error.hpp"

#define GPT_STR_(x) #x
#define GPT_STR(x) GPT_STR_(x)

namespace gpt::cuda {
namespace {

template <typename Fn>
void resolve(void* lib, const std::string& path, const char* name, Fn& fn) {
  dlerror();
  void* sym = dlsym(lib, name);
  if (!sym) {
    const char* why = dlerror();
    throw Error(fmt::format("{} has no {} ({}): it is not the cuDNN {} the program was built for", path, name,
                            why ? why : "null symbol", CUDNN_MAJOR));
  }
  fn = reinterpret_cast<Fn>(sym);
}

CudnnApi open_cudnn(const std::vector<std::string>& candidates) {
  std::string tried;
  for (const std::string& path : candidates) {
    void* lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
      const char* why = dlerror();
      tried += fmt::format("{}{}", tried.empty() ? "" : "; ", why ? why : path);
      continue;
    }
    CudnnApi api;
    try {
      resolve(lib, path, "cudnnGetVersion", api.get_version);
      resolve(lib, path, "cudnnGetErrorString", api.get_error_string);
      resolve(lib, path, "cudnnGetLastErrorString", api.get_last_error_string);
      resolve(lib, path, "cudnnCreate", api.create);
      resolve(lib, path, "cudnnSetStream", api.set_stream);
      resolve(lib, path, "cudnnBackendCreateDescriptor", api.create_descriptor);
      resolve(lib, path, "cudnnBackendDestroyDescriptor", api.destroy_descriptor);
      resolve(lib, path, "cudnnBackendSetAttribute", api.set_attribute);
      resolve(lib, path, "cudnnBackendGetAttribute", api.get_attribute);
      resolve(lib, path, "cudnnBackendFinalize", api.finalize);
      resolve(lib, path, "cudnnBackendExecute", api.execute);
    } catch (...) {
      dlclose(lib);
      throw;
    }
    api.path = path;
    return api;  // open for the life of the process, like cuBLASLt
  }
  throw Error(fmt::format("cannot open cuDNN, which cuDNN's attention needs: {} (add its library directory to "
                          "LD_LIBRARY_PATH, e.g. PyTorch's nvidia/cudnn/lib)",
                          tried.empty() ? "no candidate file names" : tried));
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
