// The job's bound on waiting for other ranks. When a collective can never
// finish (another rank stuck on its host, a network failure NCCL reports
// only asynchronously), a blocking wait for it (cudaStreamSynchronize,
// MPI_Wait) blocks forever and the job hangs until the scheduler's time
// limit. Every wait of the training loop for a collective, or for a GPU
// that may be waiting for one, polls instead (wait_until): meanwhile it
// asks the watchdog's check (the trainer's: every NCCL communicator's
// asynchronous error), and after the watchdog's timeout it throws
// StuckError naming what it waited for. gpt_train then ends every rank
// without waiting for anything again (apps/gpt_train.cpp).
//
// Process-wide, set by the trainer for its lifetime (--comm-timeout);
// without one (op tests, benchmarks) the waits block as before.
#pragma once

#include <chrono>
#include <functional>

namespace gpt {

struct Watchdog {
  double timeout_s = 0;         // 0: no limit
  std::function<void()> check;  // throws when a communicator has failed; may be empty

  // Neither a limit nor a check: a wait may simply block.
  bool idle() const { return timeout_s <= 0 && !check; }
};

void set_watchdog(Watchdog w);
const Watchdog& watchdog();

// What a wait is for, as its StuckError names it: "<what>", or "<what>
// (<detail>)" ("the GPU (gradient norm)"). In two parts so that the name is
// formatted only when the wait fails: the hot loop's waits allocate nothing.
struct WaitName {
  const char* what;
  const char* detail = nullptr;
  WaitName(const char* w, const char* d = nullptr) : what(w), detail(d) {}  // NOLINT: implicit from a string
};

// The polling loop: calls ready() until it is true, w.check() every few
// polls, and throws StuckError when w.timeout_s passes first ("waited N s
// for <name> without it finishing ..."; the clock is a parameter for
// tests). The first polls spin (most waits are short), later ones sleep
// 50 us between polls.
void wait_until(const std::function<bool()>& ready, const Watchdog& w, WaitName name,
                const std::function<std::chrono::steady_clock::time_point()>& now = std::chrono::steady_clock::now);

}  // namespace gpt
