// Writes the events core/trace.hpp recorded on every rank of `comm` into one
// Chrome trace-event JSON file (rank 0 writes; collective), viewable in
// Perfetto (ui.perfetto.dev) or chrome://tracing: one process per rank,
// one thread per lane (training loop, each communicator, the checkpoint
// writer). Slices are "X" events; collectives' issue -> completion spans are
// async "b"/"e" pairs. Timestamps are microseconds since the trace started.
#pragma once

#include <mpi.h>

#include <string>

namespace gpt {

void write_trace(const std::string& path, MPI_Comm comm);
// Before a run: throws ConfigError on every rank when rank 0 cannot create
// `path`, so a bad --trace fails at start-up, not after the training.
void check_trace_path(const std::string& path, MPI_Comm comm);

}  // namespace gpt
