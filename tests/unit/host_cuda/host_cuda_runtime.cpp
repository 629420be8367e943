// A host implementation of the CUDA runtime calls that the device allocator
// (core/cuda/device_memory.cpp), Matmul and the kernels' error checks make,
// for tests without a GPU: link this instead of libcudart. "Device" memory is
// host memory with cudaMalloc's 256-byte alignment, filled with 0xFF (NaN in
// fp32 and bf16) so a read of memory nothing wrote poisons results; streams
// are the host's program order.
#include <cuda_runtime.h>

#include <cstdlib>
#include <cstring>

namespace {
cudaError_t g_last = cudaSuccess;
}

cudaError_t cudaMalloc(void** p, size_t bytes) {
  *p = std::aligned_alloc(256, (bytes + 255) / 256 * 256);
  if (!*p) return g_last = cudaErrorMemoryAllocation;
  std::memset(*p, 0xFF, bytes);
  return cudaSuccess;
}
cudaError_t cudaFree(void* p) {
  std::free(p);
  return cudaSuccess;
}
cudaError_t cudaMemset(void* p, int value, size_t bytes) {
  std::memset(p, value, bytes);
  return cudaSuccess;
}
cudaError_t cudaMemsetAsync(void* p, int value, size_t bytes, cudaStream_t) { return cudaMemset(p, value, bytes); }
cudaError_t cudaDeviceSynchronize() { return cudaSuccess; }
cudaError_t cudaGetLastError() {
  const cudaError_t e = g_last;
  g_last = cudaSuccess;
  return e;
}
const char* cudaGetErrorString(cudaError_t e) { return e == cudaSuccess ? "no error" : "host CUDA runtime error"; }
