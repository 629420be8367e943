#include "comm/bootstrap.hpp"

#include <algorithm>

#include "core/error.hpp"

namespace gpt {

int pick_gpu(int local_rank, int local_size, int device_count, bool allow_sharing) {
  if (device_count <= 0) throw ConfigError("no CUDA device is visible on this node (check CUDA_VISIBLE_DEVICES)");
  if (local_size > device_count && !allow_sharing) {
    throw ConfigError(fmt::format("{} ranks on this node but only {} GPU(s): launch one rank per GPU, or allow "
                                  "sharing (several ranks per GPU, MPI communicator)",
                                  local_size, device_count));
  }
  return local_rank % device_count;
}

int ranks_on_gpu(int local_rank, int local_size, int device_count) {
  if (device_count <= 0) return 1;
  const int gpu = local_rank % device_count;
  return std::max(1, local_size / device_count + (gpu < local_size % device_count ? 1 : 0));
}

}  // namespace gpt
