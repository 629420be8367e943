// A bound on stretches of blocking calls that cannot poll. The watchdog
// (watchdog.hpp) bounds the waits we write; but HDF5's collective
// checkpoint I/O, NCCL's communicator set-up and the start-up's MPI calls
// block inside libraries until every rank arrives. One rank stopped for good
// (a deadlock, a file system read that never returns) would hang the others
// there until the scheduler's time limit.
//
// A StallGuard arms such a stretch: when the thread that made it notes no
// progress (note_progress) for timeout_s, a monitor thread calls the stall
// handler with "no progress for N s in <what> (last done: <last>) ...".
// gpt_train's handler prints that as its error line and ends every rank
// (MPI_Abort, which is safe from another thread under
// MPI_THREAD_MULTIPLE). Progress, not the whole stretch, is bounded: a large
// checkpoint on a slow file system may take longer than timeout_s to write,
// but no one tensor of it should.
//
// Guards nest per thread (note_progress renews the innermost one and those
// enclosing it) and may
// live on several threads at once (the background checkpoint writer's and
// the trainer's). Not for the hot loop: arming starts the monitor thread
// once and allocates.
#pragma once

#include <functional>
#include <string>

namespace gpt {

class StallGuard {
 public:
  // timeout_s <= 0: inert (no limit).
  StallGuard(double timeout_s, std::string what);
  ~StallGuard();
  StallGuard(const StallGuard&) = delete;
  StallGuard& operator=(const StallGuard&) = delete;

  struct State;

 private:
  State* state_ = nullptr;
};

// Renews the calling thread's guards, if it has any; `done` names what just
// finished, for the message.
void note_progress(const std::string& done);

// What runs when a guard expires (on the monitor thread; once per guard).
// The default prints "error: <message>" and ends the process with exit
// code 1. A handler that returns leaves the guarded thread blocked.
void set_stall_handler(std::function<void(const std::string& message)> handler);

}  // namespace gpt
