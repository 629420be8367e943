// The incremental (key/value-cached) attention of sampling on the device:
// one new query per head against the P cached positions, the new one
// included (model/cpu/attention.hpp attention_decode's contract). A header
// so the kernel also runs on the CPU through tests/unit/emulated_cuda.hpp.
#pragma once

#include <cstdint>

#include "model/cuda/dtype.cuh"

namespace gpt::cuda::detail {

constexpr int kDecodeThreads = 128;
// Scores of one head live in shared memory (16 KiB); longer contexts sample
// with whole passes (DeviceGPT::set_decode says which).
constexpr int kDecodeMaxKeys = 4096;

// out[h*HS + d] = sum_j softmax_j(scale * q_h . k_jh) v_jh[d], j < P.
// q: the new position's queries (qkv's first C columns); kv[P, 2C]: keys
// then values, as qkv's k | v columns. Block: one head. The scores go to
// shared memory, their max and sum through block reductions; each output
// element is summed by kDecodeThreads / HS groups of threads (where HS does
// not divide kDecodeThreads, the threads past the last whole group wait:
// 32 of 128 at head size 96, two groups at 48) over strided keys, and the
// groups' partial sums are added in group order: the result does not depend
// on scheduling.
template <typename T, int HS>
__global__ void __launch_bounds__(kDecodeThreads)
    attention_decode_kernel(T* out, const T* q, const T* kv, int P, int C, float scale) {
  static_assert(HS <= kDecodeThreads, "a group of HS threads");
  constexpr int kGroups = kDecodeThreads / HS;
  __shared__ float qs[HS];
  __shared__ float sc[kDecodeMaxKeys];
  __shared__ float partial[kDecodeThreads];
  const int h = blockIdx.x, tid = threadIdx.x;
  const int64_t stride = 2 * int64_t(C);
  const T* k = kv + int64_t(h) * HS;
  const T* v = kv + C + int64_t(h) * HS;
  if (tid < HS) qs[tid] = f32(q[int64_t(h) * HS + tid]) * scale;
  __syncthreads();
  float mx = -INFINITY;
  for (int j = tid; j < P; j += kDecodeThreads) {
    float s = 0.f;
#pragma unroll
    for (int d = 0; d < HS; ++d) s += qs[d] * f32(k[j * stride + d]);
    sc[j] = s;
    mx = fmaxf(mx, s);
  }
  mx = block_max(mx);
  float sum = 0.f;
  for (int j = tid; j < P; j += kDecodeThreads) {
    const float p = expf(sc[j] - mx);
    sc[j] = p;
    sum += p;
  }
  sum = block_sum(sum);  // its barriers also publish every thread's sc[]
  const int d = tid % HS, g = tid / HS;
  float acc = 0.f;
  if (kGroups * HS == kDecodeThreads || g < kGroups)  // (the first test at compile time: every thread is in a group)
    for (int j = g; j < P; j += kGroups) acc += sc[j] * f32(v[j * stride + d]);
  partial[tid] = acc;
  __syncthreads();
  if (g != 0) return;
  float o = 0.f;
#pragma unroll
  for (int i = 0; i < kGroups; ++i) o += partial[i * HS + d];
  out[int64_t(h) * HS + d] = store<T>(o / sum);
}

}  // namespace gpt::cuda::detail
