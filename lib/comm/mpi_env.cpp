#include "comm/mpi_env.hpp"

#include <unistd.h>

#include <cstdio>
#include <stdexcept>

namespace gpt {

MpiEnv::MpiEnv(int* argc, char*** argv) {
  int provided = 0;
  MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided);
  if (provided < MPI_THREAD_MULTIPLE) {
    MPI_Finalize();
    throw std::runtime_error(
        "the MPI library provides thread level " + std::to_string(provided) +
        ", this program needs MPI_THREAD_MULTIPLE (communicators progress on their own threads)");
  }
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &size_);
  // Node-local rank from the shared-memory split, not from hostnames.
  MPI_Comm node;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &node);
  MPI_Comm_rank(node, &local_rank_);
  MPI_Comm_size(node, &local_size_);
  MPI_Comm_free(&node);
  int leader = local_rank_ == 0 ? 1 : 0, minmax[2] = {local_size_, -local_size_};
  MPI_Allreduce(MPI_IN_PLACE, &leader, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  MPI_Allreduce(MPI_IN_PLACE, minmax, 2, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  num_nodes_ = leader;
  uniform_ = minmax[0] == -minmax[1];
  char host[256] = "?";
  gethostname(host, sizeof host);
  host_ = host;
}

std::string MpiEnv::slurm_summary() const {
  const char* job = std::getenv("SLURM_JOB_ID");
  if (!job) return "";
  auto get = [](const char* k) -> std::string {
    const char* v = std::getenv(k);
    return v ? v : "unset";
  };
  const std::string procid = get("SLURM_PROCID"), localid = get("SLURM_LOCALID");
  const bool agree = procid == std::to_string(rank_) && localid == std::to_string(local_rank_);
  return "SLURM_JOB_ID=" + std::string(job) + " SLURM_PROCID=" + procid + " SLURM_LOCALID=" + localid +
         (agree ? " (agree with MPI)"
                : " (differ from MPI rank " + std::to_string(rank_) + " / local " + std::to_string(local_rank_) +
                      ": launched by mpirun inside the allocation?)");
}

MpiEnv::~MpiEnv() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

void MpiEnv::abort(const std::string& message, int code, bool same_on_all_ranks) const {
  if (rank_ == 0 || !same_on_all_ranks) {
    std::fprintf(stderr, "error: %s\n", message.c_str());
    std::fflush(stderr);
  }
  if (size_ == 1) {
    MPI_Finalize();
    std::exit(code);
  }
  MPI_Abort(MPI_COMM_WORLD, code);
  std::exit(code);  // not reached
}

}  // namespace gpt
