// The host's waits for the GPU, bounded. When a collective on the GPU can
// never finish (another rank stuck, a network failure NCCL reports only
// asynchronously), cudaStreamSynchronize blocks forever and the job hangs
// until the scheduler's time limit. Every wait of the training loop goes
// through wait_stream() instead: it polls the stream, meanwhile asks the
// watchdog's check (the trainer's: every NCCL communicator's asynchronous
// error) and gives up after the watchdog's timeout with an error naming
// what it waited for. The trainer's error handling then ends every rank.
//
// Process-wide, set once by the trainer (--comm-timeout); without a
// watchdog (op tests, benchmarks) wait_stream is cudaStreamSynchronize.
#pragma once

#include <cuda_runtime.h>

#include <chrono>
#include <functional>

namespace gpt::cuda {

struct Watchdog {
  double timeout_s = 0;         // 0: no limit
  std::function<void()> check;  // throws when a communicator has failed; may be empty
};

void set_watchdog(Watchdog w);
const Watchdog& watchdog();

// Waits until the work queued on s so far has finished (what: the log's
// name for the wait, e.g. "gradient norm").
void wait_stream(cudaStream_t s, const char* what);

// The polling loop itself, for any readiness test: calls ready() until it
// is true, w.check() every few polls, and throws Error when w.timeout_s
// passes first (the clock is a parameter for tests). The first polls spin
// (a step's waits are usually short), later ones sleep 50 us between polls.
void wait_until(const std::function<bool()>& ready, const Watchdog& w, const char* what,
                const std::function<std::chrono::steady_clock::time_point()>& now = std::chrono::steady_clock::now);

}  // namespace gpt::cuda
