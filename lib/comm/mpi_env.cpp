#include "comm/mpi_env.hpp"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <thread>
#include <stdexcept>

namespace gpt {

NodeLayout node_layout(MPI_Comm comm) {
  int rank = 0;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm node;
  MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node);
  NodeLayout n;
  MPI_Comm_rank(node, &n.local_rank);
  MPI_Comm_size(node, &n.local_size);
  MPI_Comm_free(&node);
  int leaders = n.local_rank == 0 ? 1 : 0, minmax[2] = {n.local_size, -n.local_size};
  MPI_Allreduce(MPI_IN_PLACE, &leaders, 1, MPI_INT, MPI_SUM, comm);
  MPI_Allreduce(MPI_IN_PLACE, minmax, 2, MPI_INT, MPI_MIN, comm);
  n.num_nodes = leaders;
  n.uniform = minmax[0] == -minmax[1];
  return n;
}

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
  const NodeLayout nodes = node_layout(MPI_COMM_WORLD);
  local_rank_ = nodes.local_rank;
  local_size_ = nodes.local_size;
  num_nodes_ = nodes.num_nodes;
  uniform_ = nodes.uniform;
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

// MPI_Initialized and MPI_Finalized may be called from any thread at any time.
[[noreturn]] static void end_job(int code) {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (initialized && !finalized) MPI_Abort(MPI_COMM_WORLD, code);
  std::_Exit(code);  // not reached after MPI_Abort
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
  // Only rank 0 prints an error every rank has: let it print and abort the
  // job first. Should rank 0 not have it after all, this rank still aborts.
  if (same_on_all_ranks && rank_ != 0) std::this_thread::sleep_for(std::chrono::seconds(2));
  end_job(code);
}

void MpiEnv::abort_now(const std::string& message, int code) {
  std::fprintf(stderr, "error: %s\n", message.c_str());
  std::fflush(stderr);
  end_job(code);
}

}  // namespace gpt
