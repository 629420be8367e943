// The emulated backend's count of the calls a process makes into the CUDA
// runtime, cuBLASLt and NCCL, by kind, for the hot-loop audit
// (tests/gpu/hot_loop.sh): what a training step costs the host, measured as
// the difference between two runs of different lengths, so what a step
// calls (allocations, synchronisations, copies from pageable memory,
// descriptor set-up, launches, collectives) can be held to a budget.
//
// With GPT_EMULATED_API_LOG=DIR set, each process writes at exit
// DIR/api.PID.txt: one line per kind, `<kind> <calls>`, kinds sorted. The
// kinds, grouped by prefix:
//   alloc.*    cudaMalloc, cudaFree, cudaMallocHost, cudaFreeHost
//   sync.*     the host waits for the device: device, stream, event, memcpy
//              (a blocking cudaMemcpy), pageable_d2h (cudaMemcpyAsync into
//              pageable memory returns only when the copy is done)
//   copy.*     h2d, d2h, d2d, h2h, and pageable (the host side is pageable
//              memory, which the driver stages through a pinned buffer)
//   create.*   streams, events, cuBLASLt descriptors, layouts, preferences
//   destroy.*  their destruction
//   cublaslt.* matmul, heuristic (an algorithm search)
//   nccl.*     collectives
//   launch, memset, event.record, event.wait
#pragma once

namespace host_cuda {

// Counts one call of `kind` (a string literal). Thread-safe; nothing is
// kept unless GPT_EMULATED_API_LOG is set.
void count_call(const char* kind);

}  // namespace host_cuda
