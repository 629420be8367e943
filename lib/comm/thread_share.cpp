#include "comm/thread_share.hpp"

#include <sched.h>

#include <algorithm>
#include <thread>
#include <vector>

#include <fmt/format.h>

namespace gpt {

ThreadShare share_cores(MPI_Comm comm) {
  cpu_set_t mine;
  CPU_ZERO(&mine);
  if (sched_getaffinity(0, sizeof(mine), &mine) != 0) {  // unknown: every core, like the other ranks
    const int hw = std::clamp(int(std::thread::hardware_concurrency()), 1, CPU_SETSIZE);
    for (int c = 0; c < hw; ++c) CPU_SET(c, &mine);
  }
  int rank = 0;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm node;
  MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node);
  int n = 0;
  MPI_Comm_size(node, &n);
  std::vector<cpu_set_t> masks(static_cast<size_t>(n));
  MPI_Allgather(&mine, int(sizeof(mine)), MPI_BYTE, masks.data(), int(sizeof(mine)), MPI_BYTE, node);
  MPI_Comm_free(&node);
  ThreadShare s;
  s.cores = std::max(1, CPU_COUNT(&mine));
  s.sharers = 0;
  for (cpu_set_t& m : masks) {
    cpu_set_t both;
    CPU_AND(&both, &m, &mine);
    s.sharers += CPU_COUNT(&both) > 0 ? 1 : 0;
  }
  s.sharers = std::max(1, s.sharers);
  s.threads = std::max(1, s.cores / s.sharers);
  return s;
}

std::string describe(const ThreadShare& s) {
  return fmt::format("{} thread{} per rank ({} core{} shared by {} rank{})", s.threads, s.threads == 1 ? "" : "s",
                     s.cores, s.cores == 1 ? "" : "s", s.sharers, s.sharers == 1 ? "" : "s");
}

}  // namespace gpt
