// Host MPI collectives bounded by the job's watchdog (core/watchdog.hpp).
// A blocking MPI call waits forever for a rank that never joins (its host
// stuck in a deadlock or a read that never returns); these start the
// nonblocking call and poll it, so such a wait ends in StuckError after
// --comm-timeout instead, and gpt_train ends every rank, the stuck one
// included (MPI_Abort). Without a watchdog they block as MPI_Wait does.
// For the trainer's own few scalars per step (the loss mean, the memory
// high-water marks, the clock barrier); the strategies' traffic goes
// through a Communicator.
#pragma once

#include <mpi.h>

namespace gpt {

// Waits for *request (what: the log's name for it, e.g. "the loss mean
// over ranks").
void wait_request(MPI_Request* request, const char* what);

void bounded_allreduce(void* inout, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm, const char* what);
void bounded_barrier(MPI_Comm comm, const char* what);

}  // namespace gpt
