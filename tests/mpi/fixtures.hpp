// Shared set-up for the MPI training tests: a token shard with learnable
// structure (written once by rank 0) and a small, fast run configuration.
#pragma once

#include <string>

#include "io/run_config.hpp"

namespace gpt::test {

// Directory holding data_train_000000.bin; created on first use (collective).
const std::string& data_dir();
// 2 layers, width 64, T=32, global batch 8 (6 on 3 ranks) split over the world, 10 steps,
// clipping active, 1 thread, quiet.
RunConfig small_run();

}  // namespace gpt::test
