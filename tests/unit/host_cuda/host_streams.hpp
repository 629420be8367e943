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

// A collective that never finishes (GPT_EMULATED_NCCL_FAULT): queued and
// ordered as enqueue_collective, but it never runs, so neither does any
// later collective nor anything that waits for it. cudaStreamQuery then
// answers cudaErrorNotReady; a synchronisation that needs it ends the
// process with a message (on a GPU it would block forever). `reached`
// (may be empty) is called once, when the stream order first gets to it
// (what it waits for has run): a GPU running the collective.
void enqueue_stuck_collective(cudaStream_t stream, std::function<void()> reached = {});

// Runs every queued operation (cudaDeviceSynchronize; call: the API call
// that synchronises, for the message when it would hang).
void synchronize_device(const char* call);

// The order queued work runs in (host_streams.cpp); GPT_EMULATED_STREAMS
// (lazy, eager-comm, program) sets it for a whole process, tests with this.
enum class StreamOrder { kLazy, kEagerComm, kProgram };
void set_stream_order(StreamOrder order);

}  // namespace host_cuda
