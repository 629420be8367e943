// A stand-in for the CUDA driver library (libcuda.so.1) on a machine without
// a GPU, for the deviceless cuDNN tests (test_cudnn_attention.cpp). Every
// driver entry point the toolkit's stub exports answers as the stub does,
// CUDA_ERROR_STUB_LIBRARY (those are generated from the stub's symbol list
// by tests/CMakeLists.txt), except the three that load a compiled kernel:
// cuLibraryLoadData accepts the image, cuLibraryGetKernel hands out a
// handle for the kernel named and records the name, cuLibraryUnload
// succeeds. That is all cuDNN's deviceless plan build (cuDNN 9.8+) asks of
// the driver once its kernel is compiled, so the plan finalizes and says
// which kernel it would launch and how much workspace it needs. Nothing
// here runs a kernel.
#include <cuda.h>

#include <mutex>
#include <string>
#include <vector>

namespace {

std::mutex g_mutex;
std::vector<std::string> g_kernels;  // every kernel asked for, in order
int g_handle;                        // what the handles point at

}  // namespace

extern "C" {

CUresult cuLibraryLoadData(CUlibrary* library, const void* code, CUjit_option*, void**, unsigned int, CUlibraryOption*,
                           void**, unsigned int) {
  if (!library || !code) return CUDA_ERROR_INVALID_VALUE;
  *library = reinterpret_cast<CUlibrary>(&g_handle);
  return CUDA_SUCCESS;
}

CUresult cuLibraryGetKernel(CUkernel* kernel, CUlibrary library, const char* name) {
  if (!kernel || !library || !name) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> lock(g_mutex);
  g_kernels.emplace_back(name);
  *kernel = reinterpret_cast<CUkernel>(&g_handle);
  return CUDA_SUCCESS;
}

CUresult cuLibraryUnload(CUlibrary) { return CUDA_SUCCESS; }

// For the tests (found with dlsym): how many kernels were asked for so far,
// and the name of the i-th ("" out of range).
int gpt_fake_libcuda_kernel_count() {
  std::lock_guard<std::mutex> lock(g_mutex);
  return int(g_kernels.size());
}

const char* gpt_fake_libcuda_kernel(int i) {
  std::lock_guard<std::mutex> lock(g_mutex);
  return i >= 0 && i < int(g_kernels.size()) ? g_kernels[size_t(i)].c_str() : "";
}

}  // extern "C"
