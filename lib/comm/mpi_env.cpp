#include "comm/mpi_env.hpp"

#include <cstdio>
#include <stdexcept>

namespace gpt {

MpiEnv::MpiEnv(int* argc, char*** argv) {
  int provided = 0;
  MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided);
  if (provided < MPI_THREAD_FUNNELED) {
    MPI_Finalize();
    throw std::runtime_error("MPI library provides less than MPI_THREAD_FUNNELED");
  }
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &size_);
  // Node-local rank from the shared-memory split, not from hostnames.
  MPI_Comm node;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &node);
  MPI_Comm_rank(node, &local_rank_);
  MPI_Comm_size(node, &local_size_);
  MPI_Comm_free(&node);
}

MpiEnv::~MpiEnv() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

void MpiEnv::abort(const std::string& message, int code) const {
  std::fprintf(stderr, "error: %s\n", message.c_str());
  std::fflush(stderr);
  if (size_ == 1) {
    MPI_Finalize();
    std::exit(code);
  }
  MPI_Abort(MPI_COMM_WORLD, code);
  std::exit(code);  // not reached
}

}  // namespace gpt
