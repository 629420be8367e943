// MPI bootstrap: initialisation, world and node-local ranks, and the one way
// a fatal error ends the job (every rank, never a hang).
#pragma once

#include <mpi.h>

#include <cstdlib>
#include <string>
#include <vector>

namespace gpt {

// How the ranks of `comm` sit on nodes (shared-memory domains from
// MPI_Comm_split_type, not hostnames). Collective over comm.
struct NodeLayout {
  int local_rank = 0, local_size = 1, num_nodes = 1;
  bool uniform = true;  // every node runs local_size ranks
};
NodeLayout node_layout(MPI_Comm comm);
// Each rank of this rank's node gives `bytes` bytes; returns all of them in
// node-rank order. Collective over comm.
std::vector<char> gather_on_node(MPI_Comm comm, const void* mine, int bytes);
// How many ranks of this rank's node (itself included) give the same `key`
// (at most 64 characters are compared), e.g. the UUID of the GPU each
// uses. Collective over comm.
int ranks_on_node_with(MPI_Comm comm, const std::string& key);

class MpiEnv {
 public:
  // MPI_Init_thread with MPI_THREAD_MULTIPLE: each communicator runs its
  // collectives on its own progress thread, and those call MPI concurrently.
  // Throws std::runtime_error naming the level if the library provides less.
  MpiEnv(int* argc, char*** argv);
  ~MpiEnv();
  MpiEnv(const MpiEnv&) = delete;
  MpiEnv& operator=(const MpiEnv&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  int local_rank() const { return local_rank_; }
  int local_size() const { return local_size_; }
  // Nodes = shared-memory domains. uniform(): every node runs local_size() ranks.
  int num_nodes() const { return num_nodes_; }
  bool uniform() const { return uniform_; }
  std::string hostname() const { return host_; }
  // Under SLURM: a one-line description of SLURM_JOB_ID/PROCID/LOCALID and
  // whether they agree with MPI's ranks (they legitimately do not when
  // mpirun is used inside an allocation); empty outside SLURM.
  std::string slurm_summary() const;
  MPI_Comm world() const { return MPI_COMM_WORLD; }

  // Ends every rank with `code` (MPI_Abort when there are several) after
  // "error: <message>" on stderr. The ranks that end with an error in the
  // same moment send it to rank 0, which prints each distinct message once,
  // naming its ranks and hosts unless every rank had it
  // (comm/error_report.hpp): 256 ranks with the same bad shard print one
  // line, one node without the file one line naming its ranks. A rank whose
  // report rank 0 does not take (rank 0 has no error) prints its own line.
  // same_on_all_ranks: the error comes from input every rank reads alike
  // (the config), so its line names no ranks. Costs at most a few seconds.
  [[noreturn]] void abort(const std::string& message, int code = 1, bool same_on_all_ranks = false) const;

  // Logs "error: <message>" on stderr and ends every rank with `code` at
  // once (MPI_Abort; _Exit before MPI_Init and after MPI_Finalize). Unlike
  // abort() it never finalizes, so it is safe from any thread, also while
  // another thread is inside MPI, MPI_Finalize's wait for the other ranks
  // included: the StallGuard's monitor thread ends the job with it.
  [[noreturn]] static void abort_now(const std::string& message, int code = 1);

 private:
  int rank_ = 0, size_ = 1, local_rank_ = 0, local_size_ = 1, num_nodes_ = 1;
  bool uniform_ = true;
  std::string host_;
  MPI_Comm reports_ = MPI_COMM_NULL;  // abort()'s error reports
};

}  // namespace gpt
