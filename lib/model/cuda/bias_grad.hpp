// Bias gradient of a linear layer on the device: column sums of dout in a
// fixed order (deterministic), accumulated (+=) like every parameter
// gradient (model/cpu/matmul.hpp's contract). Kernels: bias_grad_kernels.cuh.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "model/cuda/types.hpp"

namespace gpt::cuda {

// Floats of scratch bias_grad needs for N rows of OC columns.
int64_t bias_grad_scratch(int64_t N, int64_t OC);
// Arrival counters bias_grad needs for OC columns.
int64_t bias_grad_arrivals(int64_t OC);

// dbias[OC] += column sums of dout[N, OC], one launch. scratch:
// bias_grad_scratch(N, OC) floats; arrivals: bias_grad_arrivals(OC)
// counters, zero before the first call (bias_grad leaves them zero).
// width: elements each lane reads per row: 1 forces one (benchmarks time
// both); anything else chooses (a 16-byte vector when OC is a whole number
// of them and dout is 16-byte aligned, else 1). Returns the elements each
// lane read.
template <typename T>
int bias_grad(T* dbias, const T* dout, float* scratch, unsigned* arrivals, int64_t N, int64_t OC, cudaStream_t s,
              int width = 0);

}  // namespace gpt::cuda
