// Small device kernels the strategies and the optimizer need: casts between
// storage types, accumulation of a reduced gradient piece into its fp32
// accumulator, and the deterministic sum of squares behind the global
// gradient norm. Only the type pairs the backend uses are compiled (a kernel
// no test launches fails emulated.launch_resources).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "model/cuda/types.hpp"

namespace gpt::cuda {

// dst[i] = src[i] converted (round to nearest even into bf16 and float). To,
// From: float, bf16; bf16, float; float, float; float, double (the norm).
template <typename To, typename From>
void convert(To* dst, const From* src, int64_t n, cudaStream_t s);

// acc[i] += src[i] in fp32 (rounded once to Acc). Acc, Src: float, float;
// float, bf16; bf16, bf16.
template <typename Acc, typename Src>
void accumulate(Acc* acc, const Src* src, int64_t n, cudaStream_t s);

// Doubles of scratch sum_squares and sum_values need: zeroed once before
// its first use (a DeviceBuffer is), and left as the sums need it after
// each. One scratch serves one stream's sums.
int64_t sum_squares_scratch();

// *out += the sum of x[i]^2 over [0, n), in double. Deterministic: a fixed
// grid, every block sums a fixed set of elements, the last block to finish
// adds the blocks' partials in block order. One launch. out is a device
// double.
template <typename T>
void sum_squares(const T* x, int64_t n, double* out, double* scratch, cudaStream_t s);

// The same over count arrays xs[k] of ns[k] elements (host arrays of device
// pointers and sizes), one launch per 64 arrays: the global gradient norm
// over all of a rank's units. Deterministic as above for a given list.
template <typename T>
void sum_squares(const T* const* xs, const int64_t* ns, int count, double* out, double* scratch, cudaStream_t s);

// *out += sum of x[i] over [0, n) (per-row losses), deterministic as above.
void sum_values(const float* x, int64_t n, double* out, double* scratch, cudaStream_t s);

}  // namespace gpt::cuda
