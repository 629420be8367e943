// Streams and events of the host CUDA runtime (host_streams.cpp): work on a
// stream (kernel launches, copies, memsets, cuBLASLt products, NCCL
// collectives) is queued and runs later, when something the host does
// needs it, in an order that respects only what CUDA promises.
#pragma once

#include <cuda_runtime.h>

#include <functional>

namespace host_cuda {

// Queues `work` as `stream`'s next operation (nullptr or cudaStreamLegacy:
// the legacy default stream). It runs after everything queued on that
// stream before it, after the legacy stream's earlier work if the stream is
// a blocking one (and, on the legacy stream, after every blocking stream's
// earlier work), and after the events the stream was told to wait for.
// Nothing else orders it: see GPT_EMULATED_STREAMS in host_streams.cpp.
void enqueue(cudaStream_t stream, std::function<void()> work);

// enqueue, and after every earlier enqueue_collective work of the process
// (any stream): collectives run in the order they were issued, which is the
// same on every rank, so their MPI calls (host_nccl.cpp) match up however
// late the lazy order runs them.
void enqueue_collective(cudaStream_t stream, std::function<void()> work);

// Runs every queued operation (cudaDeviceSynchronize).
void synchronize_device();

// The order queued work runs in (host_streams.cpp); GPT_EMULATED_STREAMS
// (lazy, eager-comm, program) sets it for a whole process, tests with this.
enum class StreamOrder { kLazy, kEagerComm, kProgram };
void set_stream_order(StreamOrder order);

}  // namespace host_cuda
