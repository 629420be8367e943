// CPU threads per rank when the run does not say (--threads 0 and no
// OMP_NUM_THREADS): the cores this rank may run on, shared with the other
// ranks on its node that may run on the same cores. Without it every rank
// of `mpirun -np 8` on a 64-core node would start 64 threads (512 on 64
// cores), and OpenMP's and Eigen's threads would fight over them; torchrun
// sets OMP_NUM_THREADS=1 for the same reason. Under srun's or mpirun's core
// binding each rank's cores are its own and it uses all of them.
#pragma once

#include <mpi.h>

#include <string>

namespace gpt {

struct ThreadShare {
  int threads = 1;  // >= 1
  int cores = 1;    // cores this rank may run on (its affinity mask)
  int sharers = 1;  // ranks on this node whose masks overlap this rank's, this one included
};

// Collective over comm (the node's ranks exchange their affinity masks).
ThreadShare share_cores(MPI_Comm comm);

// "2 threads per rank (2 cores shared by 1 rank)": for the log.
std::string describe(const ThreadShare& s);

}  // namespace gpt
