// Measured fp32 GEMM throughput of this CPU with the current thread count:
// the denominator of CPU MFU (there is no datasheet peak to trust for a
// shared virtual machine).
#pragma once

namespace gpt::cpu {

// FLOP/s of the best of `reps` square GEMMs of size n (Eigen, all threads).
double measure_gemm_peak(int n = 1024, int reps = 5);

}  // namespace gpt::cpu
