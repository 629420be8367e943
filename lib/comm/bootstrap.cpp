#include "comm/bootstrap.hpp"

#include "core/error.hpp"

namespace gpt {

int pick_gpu(int local_rank, int device_count) {
  if (device_count <= 0) throw ConfigError("no CUDA device is visible on this node (check CUDA_VISIBLE_DEVICES)");
  return local_rank % device_count;
}

}  // namespace gpt
