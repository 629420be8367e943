// Which GPU a rank uses: its node-local rank. Fewer GPUs than ranks on a
// node is an error unless sharing is asked for explicitly (tests that run
// several ranks on one GPU with the MPI communicator).
#pragma once

namespace gpt {

// Throws ConfigError with a one-line reason when no device can be chosen.
int pick_gpu(int local_rank, int local_size, int device_count, bool allow_sharing);

}  // namespace gpt
