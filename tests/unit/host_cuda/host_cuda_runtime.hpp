// Test controls of the host CUDA runtime (host_cuda_runtime.cpp).
#pragma once

#include <cstddef>

namespace host_cuda {

// cudaMalloc fails (cudaErrorMemoryAllocation) once live allocations would
// exceed `capacity` bytes (each rounded up to 256); unlimited by default.
void set_device_memory(size_t capacity);
size_t device_memory_used();

// What a pointer points into: a cudaMalloc block, a cudaMallocHost block
// (pinned), or other host memory (pageable), for the API log's copy kinds.
enum class Memory { kDevice, kPinned, kPageable };
Memory memory_of(const void* p);

}  // namespace host_cuda
