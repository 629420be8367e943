// Device-side element types of the CUDA backend. Kernels are templated on
// the storage type T (float, or __nv_bfloat16 for --precision bf16) and
// always compute in fp32: loads widen with f32(), stores round to nearest
// even with store<T>().
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <initializer_list>
#include <type_traits>

#include "model/cuda/types.hpp"

namespace gpt::cuda {

__device__ __forceinline__ float f32(float x) { return x; }
__device__ __forceinline__ float f32(bf16 x) { return __bfloat162float(x); }
__device__ __forceinline__ float f32(double x) { return float(x); }  // round to nearest

template <typename T>
__device__ __forceinline__ T store(float x);
template <>
__device__ __forceinline__ float store<float>(float x) { return x; }
template <>
__device__ __forceinline__ bf16 store<bf16>(float x) { return __float2bfloat16_rn(x); }

// Base-2 exponentials: exp(x) = exp2f(x * kLog2e), and exp2f is one
// ex2.approx instruction where expf is several; kernels fold kLog2e into the
// FFMA they already do (attention's scores, the LM head's softmax).
constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;

__device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ __forceinline__ float warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// Sum over a block of blockDim.x threads (a multiple of 32, at most 1024),
// returned to every thread. The order of additions is fixed: deterministic.
__device__ __forceinline__ float block_sum(float v) {
  __shared__ float part[32];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, nwarps = blockDim.x / 32;
  v = warp_sum(v);
  __syncthreads();  // part[] may still be read by a previous call
  if (lane == 0) part[warp] = v;
  __syncthreads();
  v = lane < nwarps ? part[lane] : 0.f;
  return warp_sum(v);
}
__device__ __forceinline__ float block_max(float v) {
  __shared__ float part[32];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, nwarps = blockDim.x / 32;
  v = warp_max(v);
  __syncthreads();
  if (lane == 0) part[warp] = v;
  __syncthreads();
  v = lane < nwarps ? part[lane] : -INFINITY;
  return warp_max(v);
}

// Vectorised access: memory-bound kernels take a width W (elements per
// access) as a template parameter: kVec<T> (one 16-byte load or store) when
// every row they touch starts 16-byte aligned, else 1. The same kernel
// source serves both; vector_width() is the launcher's choice.
template <typename T>
constexpr int kVec = int(16 / sizeof(T));

// W elements of T, loaded or stored as one access of W * sizeof(T) bytes
// (16 when W is kVec<T>; the pointer aligned to that). Under the emulator a
// misaligned address fails the launch, as the GPU would fault where x86
// would not.
template <typename T, int W>
struct alignas(W * sizeof(T)) Pack {
  T e[W];
};
template <int W, typename T>
__device__ __forceinline__ Pack<T, W> load_pack(const T* p) {
#ifdef GPT_EMULATED_CUDA
  if (reinterpret_cast<uintptr_t>(p) % (W * sizeof(T)) != 0) emulated_cuda::fail("load_pack: a misaligned address");
#endif
  return *reinterpret_cast<const Pack<T, W>*>(p);
}
template <int W, typename T>
__device__ __forceinline__ void store_pack(T* p, const Pack<T, W>& v) {
#ifdef GPT_EMULATED_CUDA
  if (reinterpret_cast<uintptr_t>(p) % (W * sizeof(T)) != 0) emulated_cuda::fail("store_pack: a misaligned address");
#endif
  *reinterpret_cast<Pack<T, W>*>(p) = v;
}

// Makes v's registers opaque to the compiler here: what it computed from them
// before (elements widened to fp32) is computed again after, instead of kept
// live in registers across this point. A kernel that keeps a row in
// registers and passes over it more than once puts this between the passes
// (ptxas for sm_100 otherwise keeps a bf16 row's widened floats and spills).
__device__ __forceinline__ void opaque(uint4& v) {
  asm volatile("" : "+r"(v.x), "+r"(v.y), "+r"(v.z), "+r"(v.w));
}
// The same for a 16-byte Pack (its bytes copied, not type-punned: the copies
// are register moves the compiler folds away).
template <typename T, int W>
__device__ __forceinline__ void opaque(Pack<T, W>& p) {
  static_assert(sizeof(Pack<T, W>) == sizeof(uint4));
  uint4 v;
  memcpy(&v, &p, sizeof v);
  opaque(v);
  memcpy(&p, &v, sizeof v);
}

// W consecutive elements at p widened to fp32 (p 16-byte aligned when
// W * sizeof(T) == 16).
template <int W, typename T>
__device__ __forceinline__ void load_n(float (&v)[W], const T* p) {
  if constexpr (W * sizeof(T) == 16) {
    const Pack<T, W> raw = load_pack<W>(p);
#pragma unroll
    for (int k = 0; k < W; ++k) v[k] = f32(raw.e[k]);
  } else {
#pragma unroll
    for (int k = 0; k < W; ++k) v[k] = f32(p[k]);
  }
}
// W fp32 values rounded to T and stored at p (alignment as load_n).
template <int W, typename T>
__device__ __forceinline__ void store_n(T* p, const float (&v)[W]) {
  if constexpr (W * sizeof(T) == 16) {
    Pack<T, W> raw;
#pragma unroll
    for (int k = 0; k < W; ++k) raw.e[k] = store<T>(v[k]);
    store_pack<W>(p, raw);
  } else {
#pragma unroll
    for (int k = 0; k < W; ++k) p[k] = store<T>(v[k]);
  }
}

// kVec<T> when rows of `row_elems` elements starting at each of ptrs are
// all 16-byte aligned, else 1.
template <typename T>
inline int vector_width(int64_t row_elems, std::initializer_list<const void*> ptrs) {
  if (row_elems % kVec<T> != 0) return 1;
  for (const void* p : ptrs)
    if (reinterpret_cast<uintptr_t>(p) % 16 != 0) return 1;
  return kVec<T>;
}

// Calls launch(std::integral_constant<int, W>{}) with W = width (kVec<T> or
// 1), so a launcher names its kernel once for both instantiations.
template <typename T, typename Launch>
inline void with_width(int width, Launch launch) {
  if (width == kVec<T>)
    launch(std::integral_constant<int, kVec<T>>{});
  else
    launch(std::integral_constant<int, 1>{});
}

inline unsigned blocks_for(int64_t n, int threads) { return static_cast<unsigned>((n + threads - 1) / threads); }

}  // namespace gpt::cuda
