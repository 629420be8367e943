// The cuDNN entry points the backend calls (attention_cudnn.cpp: its fused
// attention through the backend graph API), resolved on first use rather
// than linked, for the reasons cublaslt_api.hpp gives for cuBLASLt: only a
// process that asks for cuDNN's attention opens "libcudnn.so.<major of the
// headers we compiled against>" (LD_LIBRARY_PATH, the runpath,
// ld.so.cache, then the directory CMake found it in). PyTorch's wheels
// bring it as nvidia/cudnn/lib/libcudnn.so.9; scripts/gpu_verify.sh puts
// that directory on LD_LIBRARY_PATH when the toolkit has none.
#pragma once

#include <cudnn.h>

#include <string>
#include <vector>

namespace gpt::cuda {

struct CudnnApi {
  decltype(&::cudnnGetVersion) get_version;
  decltype(&::cudnnGetErrorString) get_error_string;
  decltype(&::cudnnGetLastErrorString) get_last_error_string;
  decltype(&::cudnnCreate) create;
  decltype(&::cudnnSetStream) set_stream;
  decltype(&::cudnnBackendCreateDescriptor) create_descriptor;
  decltype(&::cudnnBackendDestroyDescriptor) destroy_descriptor;
  decltype(&::cudnnBackendSetAttribute) set_attribute;
  decltype(&::cudnnBackendGetAttribute) get_attribute;
  decltype(&::cudnnBackendFinalize) finalize;
  decltype(&::cudnnBackendExecute) execute;
  std::string path;  // the file it came from
};

// The process's table; opens the library on the first call (thread-safe).
// Throws gpt::Error naming the library and the loader's reason when no
// candidate opens or one lacks an entry point.
const CudnnApi& cudnn();

// The file names cudnn() tries, in order.
std::vector<std::string> cudnn_candidates();

}  // namespace gpt::cuda
