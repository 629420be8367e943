// Which GPU a rank uses: its node-local rank modulo the GPUs it sees (with
// one visible GPU per rank, as under srun --gpus-per-task=1, that is its
// own). Whether ranks end up sharing a physical GPU is told by UUID where
// the trainer finds its GPU (strategies/unit_model.hpp, RankGpu).
#pragma once

namespace gpt {

// Throws ConfigError with a one-line reason when no device is visible.
int pick_gpu(int local_rank, int device_count);

}  // namespace gpt
