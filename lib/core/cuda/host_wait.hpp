// The host's waits for the GPU, bounded by the job's watchdog
// (core/watchdog.hpp). When a collective the GPU waits for can never
// finish, cudaStreamSynchronize blocks forever; these poll instead, ask the
// watchdog's check meanwhile (every NCCL communicator's asynchronous error)
// and throw StuckError after its timeout, naming the wait ("the GPU
// (gradient norm)"). Every host wait for the GPU in the training loop goes
// through them. Without a watchdog (op tests, benchmarks) they are
// cudaStreamSynchronize and cudaEventSynchronize.
#pragma once

#include <cuda_runtime.h>

#include "core/watchdog.hpp"

namespace gpt::cuda {

// Waits until the work queued on s so far has finished (what: the log's
// name for the wait, e.g. "gradient norm").
void wait_stream(cudaStream_t s, const char* what);

// Waits until the work before e's last record has finished.
void wait_event(cudaEvent_t e, const char* what);

}  // namespace gpt::cuda
