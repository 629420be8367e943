// Thread count for the CPU backend: OpenMP element-wise loops and Eigen's
// matrix products share one setting.
#pragma once

namespace gpt {

// n <= 0 keeps the OpenMP default (OMP_NUM_THREADS or the core count).
void set_num_threads(int n);
int num_threads();

}  // namespace gpt
