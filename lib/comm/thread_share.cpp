#include "comm/thread_share.hpp"

#include <sched.h>

#include <algorithm>
#include <cstring>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "comm/mpi_env.hpp"
#include "core/plural.hpp"

namespace gpt {

ThreadShare share_cores(MPI_Comm comm) {
  cpu_set_t mine;
  CPU_ZERO(&mine);
  if (sched_getaffinity(0, sizeof(mine), &mine) != 0) {  // unknown: every core, like the other ranks
    const int hw = std::clamp(int(std::thread::hardware_concurrency()), 1, CPU_SETSIZE);
    for (int c = 0; c < hw; ++c) CPU_SET(c, &mine);
  }
  const std::vector<char> all = gather_on_node(comm, &mine, int(sizeof(mine)));
  ThreadShare s;
  s.cores = std::max(1, CPU_COUNT(&mine));
  s.sharers = 0;
  for (size_t at = 0; at < all.size(); at += sizeof(cpu_set_t)) {
    cpu_set_t m, both;
    std::memcpy(&m, all.data() + at, sizeof(m));
    CPU_AND(&both, &m, &mine);
    s.sharers += CPU_COUNT(&both) > 0 ? 1 : 0;
  }
  s.sharers = std::max(1, s.sharers);
  s.threads = std::max(1, s.cores / s.sharers);
  return s;
}

std::string describe(const ThreadShare& s) {
  return fmt::format("{} per rank ({} shared by {})", count_of(s.threads, "thread"), count_of(s.cores, "core"),
                     count_of(s.sharers, "rank"));
}

}  // namespace gpt
