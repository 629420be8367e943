// A host implementation of the CUDA runtime calls that the device allocator
// (core/cuda/device_memory.cpp), Matmul and the kernels' error checks make,
// for tests without a GPU: link this instead of libcudart. "Device" memory is
// host memory with cudaMalloc's 256-byte alignment, filled with 0xFF (NaN in
// fp32 and bf16) so a read of memory nothing wrote poisons results; streams
// are the host's program order. host_cuda::set_device_memory() gives the
// "device" a capacity, for out-of-memory tests.
#include "host_cuda_runtime.hpp"

#include <cuda_runtime.h>

#include <cstdlib>
#include <cstring>
#include <map>

namespace {
cudaError_t g_last = cudaSuccess;
size_t g_capacity = size_t(-1), g_used = 0;
std::map<void*, size_t> g_blocks;
}  // namespace

namespace host_cuda {
void set_device_memory(size_t capacity) { g_capacity = capacity; }
size_t device_memory_used() { return g_used; }
}  // namespace host_cuda

// Like cudaMalloc, an allocation that does not fit sets the sticky-until-read
// last error too.
cudaError_t cudaMalloc(void** p, size_t bytes) {
  const size_t size = (bytes + 255) / 256 * 256;
  *p = size <= g_capacity - g_used ? std::aligned_alloc(256, size) : nullptr;
  if (!*p) return g_last = cudaErrorMemoryAllocation;
  std::memset(*p, 0xFF, bytes);
  g_blocks[*p] = size;
  g_used += size;
  return cudaSuccess;
}
cudaError_t cudaFree(void* p) {
  if (!p) return cudaSuccess;
  const auto it = g_blocks.find(p);
  if (it == g_blocks.end()) return g_last = cudaErrorInvalidValue;
  g_used -= it->second;
  g_blocks.erase(it);
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
const char* cudaGetErrorString(cudaError_t e) {
  switch (e) {
    case cudaSuccess: return "no error";
    case cudaErrorMemoryAllocation: return "out of memory";
    default: return "host CUDA runtime error";
  }
}
