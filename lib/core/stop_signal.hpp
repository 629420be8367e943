// A graceful stop on a signal: the scheduler's warning before a time limit
// (SLURM's --signal=USR1@SECONDS, or the SIGTERM it sends at the limit and
// on scancel) and Ctrl-C. The handler only records the signal; the trainer
// reads it once per step, agrees on it with the other ranks, and ends the
// run after that step with a checkpoint (strategies/trainer.cpp), so a
// requeued job resumes where this one stopped.
//
// A second stop signal (any of them) takes its default action and ends the
// process at once, for a user who does not want to wait for the checkpoint.
#pragma once

namespace gpt {

// The signals that request a stop: SIGTERM, SIGINT, SIGUSR1. Idempotent.
// Call after MPI_Init (Open MPI may install handlers of its own there).
void install_stop_signals();

// The first stop signal this process received, or 0. Async-signal-safe.
int stop_signal();

// "SIGTERM", "SIGINT", "SIGUSR1", or "signal N".
const char* signal_name(int sig);

// The exit code of a run that stopped early on a signal (or at --time-limit), its checkpoint
// written: EX_TEMPFAIL (sysexits.h), "try again later". Job scripts requeue
// on it.
inline constexpr int kExitStoppedEarly = 75;

// What stopped a run that reached --time-limit, where a signal's name would
// be (the trainer's summary, the metrics' "stop_signal"): it ends the same way.
inline constexpr const char* kTimeLimitStop = "time-limit";

}  // namespace gpt
