// Host MPI collectives bounded by the job's watchdog (mpi_wait.hpp).
#include "comm/mpi_wait.hpp"

#include "comm/mpi_check.hpp"
#include "core/watchdog.hpp"

namespace gpt {

void wait_request(MPI_Request* request, const char* what) {
  const Watchdog& w = watchdog();
  if (w.idle()) {
    GPT_MPI_CHECK(MPI_Wait(request, MPI_STATUS_IGNORE));
    return;
  }
  wait_until(
      [&] {
        int done = 0;
        GPT_MPI_CHECK(MPI_Test(request, &done, MPI_STATUS_IGNORE));
        return done != 0;
      },
      w, what);
}

void bounded_allreduce(void* inout, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm, const char* what) {
  MPI_Request r = MPI_REQUEST_NULL;
  GPT_MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, inout, count, type, op, comm, &r));
  wait_request(&r, what);
}

void bounded_barrier(MPI_Comm comm, const char* what) {
  MPI_Request r = MPI_REQUEST_NULL;
  GPT_MPI_CHECK(MPI_Ibarrier(comm, &r));
  wait_request(&r, what);
}

}  // namespace gpt
