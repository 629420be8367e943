#include "comm/bootstrap.hpp"

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

}  // namespace gpt
