// Kernels of the CUDA-core (SIMT) causal attention: the fp32 path, the
// reference the tensor-core kernels are timed against, and the delta kernel
// both backward paths use. attention.cu launches them. A header so the
// kernel code also runs on the CPU through tests/unit/emulated_cuda.hpp
// (test_attention_emulated).
#pragma once

#include <cstdint>

#include "model/cuda/dtype.cuh"

namespace gpt::cuda::detail::simt {

constexpr int kTile = 32;        // forward: keys per streamed tile
constexpr int kFwdWarps = 4;     // forward: query tiles per block, sharing each key/value tile

// Lanes per row (a query row in the forward and dQ, a key row in dK/dV):
// one up to head size 64, two above it (80, 96, 112, 128), so that no lane holds
// more than 64 of a row's elements in registers (the kernels keep two such
// arrays).
// Lane `part` of a row's group holds its elements d = k * G + part (k <
// HS / G): interleaved, so the group's lanes read adjacent words of a
// shared row. A score is the sum of the group's partial dot products
// (group_sum, xor shuffles in a fixed order). At one lane per row the
// kernels are those of head sizes 32 and 64 before 128 was added.
template <int HS>
constexpr int kLanesPerRow = HS > 64 ? (HS + 63) / 64 : 1;
template <int HS>
constexpr bool kSimtHeadSize = HS % kLanesPerRow<HS> == 0 && HS / kLanesPerRow<HS> <= 64 &&
                               (kLanesPerRow<HS> & (kLanesPerRow<HS> - 1)) == 0;
// Rows a warp owns, and the backward's tile rows (own and streamed alike).
template <int HS>
constexpr int kRowsPerWarp = 32 / kLanesPerRow<HS>;

template <int G>
__device__ __forceinline__ float group_sum(float v) {
  // Every lane of the warp executes this the same number of times (the
  // kernels keep their loops over a group's rows warp-uniform when G > 1).
#pragma unroll
  for (int m = 1; m < G; m <<= 1) v += __shfl_xor_sync(0xffffffffu, v, m);
  return v;
}

// Forward. Block: kFwdWarps warps, kRowsPerWarp query rows each (a group
// of kLanesPerRow lanes per row), of one (b, h). Key/value tiles of kTile
// rows are loaded to shared memory by the whole block; each group runs the
// online softmax over the keys <= its row.
template <typename T, int HS>
__global__ void __launch_bounds__(32 * kFwdWarps)
    attention_forward_kernel(T* out, float* lse, const T* qkv, int Tn, int C, int NH, float scale) {
  constexpr int G = kLanesPerRow<HS>, R = kRowsPerWarp<HS>, D = HS / G;
  static_assert(kSimtHeadSize<HS>, "a row's elements split evenly over a power-of-two group of lanes");
  __shared__ float ks[kTile][HS];
  __shared__ float vs[kTile][HS];
  const int bh = blockIdx.y, b = bh / NH, h = bh % NH;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, part = lane % G;
  const int block_q0 = blockIdx.x * R * kFwdWarps;
  const int i = block_q0 + warp * R + lane / G;  // this group's query row
  const int warp_last = min(Tn - 1, block_q0 + warp * R + R - 1);
  const int64_t row_stride = 3 * int64_t(C);
  const T* base = qkv + int64_t(b) * Tn * row_stride + int64_t(h) * HS;

  float q[D], o[D];
  const bool active = i < Tn;
#pragma unroll
  for (int k = 0; k < D; ++k) {
    q[k] = active ? f32(base[int64_t(i) * row_stride + k * G + part]) * scale : 0.f;
    o[k] = 0.f;
  }
  float m = -INFINITY, l = 0.f;
  const int last_row = min(Tn - 1, block_q0 + R * kFwdWarps - 1);
  for (int j0 = 0; j0 <= last_row; j0 += kTile) {
    __syncthreads();
    for (int e = threadIdx.x; e < kTile * HS; e += blockDim.x) {
      const int r = e / HS, d = e % HS, j = j0 + r;
      ks[r][d] = j < Tn ? f32(base[int64_t(j) * row_stride + C + d]) : 0.f;
      vs[r][d] = j < Tn ? f32(base[int64_t(j) * row_stride + 2 * C + d]) : 0.f;
    }
    __syncthreads();
    if (G == 1 && !active) continue;
    const int jmax = active ? min(kTile, i - j0 + 1) : 0;  // keys j0 .. min(i, j0+kTile-1)
    const int rend = G == 1 ? jmax : min(kTile, warp_last - j0 + 1);  // the warp's last row's, if grouped
    for (int r = 0; r < rend; ++r) {
      float s = 0.f;
#pragma unroll
      for (int k = 0; k < D; ++k) s += q[k] * ks[r][k * G + part];
      s = group_sum<G>(s);
      if (r >= jmax) continue;
      if (s > m) {
        const float corr = expf(m - s);  // 0 on the first key (m = -inf)
        l = l * corr + 1.f;
#pragma unroll
        for (int k = 0; k < D; ++k) o[k] = o[k] * corr + vs[r][k * G + part];
        m = s;
      } else {
        const float p = expf(s - m);
        l += p;
#pragma unroll
        for (int k = 0; k < D; ++k) o[k] += p * vs[r][k * G + part];
      }
    }
  }
  if (!active) return;
  const float inv = 1.f / l;
  T* dst = out + (int64_t(b) * Tn + i) * C + int64_t(h) * HS;
#pragma unroll
  for (int k = 0; k < D; ++k) dst[k * G + part] = store<T>(o[k] * inv);
  if (part == 0) lse[int64_t(bh) * Tn + i] = m + logf(l);
}

// Lanes per row of attention_delta_kernel: one 16-byte vector of the row each
// (up to a warp), a power of two so the xor shuffles stay within a row's
// lanes: at head sizes 48, 80, 96 and 112 some lanes take two vectors.
constexpr int floor_pow2(int n) { return n < 2 ? 1 : 2 * floor_pow2(n / 2); }
template <typename T, int HS>
constexpr int kDeltaLanes = HS / kVec<T> < 32 ? floor_pow2(HS / kVec<T>) : 32;

// delta[b, h, i] = sum_d dout[i, d] * out[i, d] (the softmax backward's
// row term). kDeltaLanes consecutive lanes per (b, h, i) row, so a row's
// bytes are read together (coalesced), 16 bytes per lane when vec (rows
// 16-byte aligned: the launcher's vector_width), else one element at a time;
// the lanes' sums are added by xor shuffles within the group (a fixed order).
// One thread per row reading 2-byte elements took 104 us per call at
// gpt2-124m's B=16, T=1024 on an H200 (ncu), 8x the bytes' time.
template <typename T, int HS>
__global__ void attention_delta_kernel(float* delta, const T* dout, const T* out, int Tn, int C, int NH, int64_t n,
                                       bool vec) {
  constexpr int G = kDeltaLanes<T, HS>, W = kVec<T>;
  const int64_t idx = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) / G;
  const int g = threadIdx.x % G;
  float s = 0.f;
  if (idx < n) {
    const int64_t i = idx % Tn, bh = idx / Tn, b = bh / NH, h = bh % NH;
    const T* a = dout + (b * Tn + i) * C + h * HS;
    const T* o = out + (b * Tn + i) * C + h * HS;
    if (vec) {
      for (int d = g * W; d < HS; d += G * W) {
        float av[W], ov[W];
        load_n<W>(av, a + d);
        load_n<W>(ov, o + d);
#pragma unroll
        for (int k = 0; k < W; ++k) s += av[k] * ov[k];
      }
    } else {
      for (int d = g; d < HS; d += G) s += f32(a[d]) * f32(o[d]);
    }
  }
  for (int m = G / 2; m > 0; m >>= 1) s += __shfl_xor_sync(0xffffffffu, s, m);  // whole warps: no early return
  if (idx < n && g == 0) delta[idx] = s;
}

// dk, dv. Block: one warp, kRowsPerWarp key rows of one (b, h) (a group of
// kLanesPerRow lanes per key row). Query tiles of as many rows from the key
// tile's start to the end of the sequence.
template <typename T, int HS>
__global__ void __launch_bounds__(32) attention_dkv_kernel(T* dqkv, const T* dout, const T* qkv, const float* lse,
                                                           const float* delta, int Tn, int C, int NH, float scale) {
  constexpr int G = kLanesPerRow<HS>, R = kRowsPerWarp<HS>, D = HS / G;
  static_assert(kSimtHeadSize<HS>, "a row's elements split evenly over a power-of-two group of lanes");
  // This group's k and v rows, padded so that the warp's lanes (row, part)
  // read distinct banks: a row of HS + G words starts G banks after the last.
  __shared__ float kown[R][HS + G];
  __shared__ float vown[R][HS + G];
  __shared__ float qs[R][HS];  // query tile (broadcast reads)
  __shared__ float dos[R][HS];
  __shared__ float lse_s[R], delta_s[R];
  const int bh = blockIdx.y, b = bh / NH, h = bh % NH, lane = threadIdx.x;
  const int row = lane / G, part = lane % G;
  const int j0 = blockIdx.x * R, j = j0 + row;
  const int64_t row_stride = 3 * int64_t(C);
  const T* base = qkv + int64_t(b) * Tn * row_stride + int64_t(h) * HS;
  const T* dbase = dout + int64_t(b) * Tn * C + int64_t(h) * HS;
  const bool active = j < Tn;
  for (int e = lane; e < R * HS; e += 32) {
    const int r = e / HS, d = e % HS, jr = j0 + r;
    kown[r][d] = jr < Tn ? f32(base[int64_t(jr) * row_stride + C + d]) : 0.f;
    vown[r][d] = jr < Tn ? f32(base[int64_t(jr) * row_stride + 2 * C + d]) : 0.f;
  }
  float dk[D], dv[D];
#pragma unroll
  for (int k = 0; k < D; ++k) dk[k] = dv[k] = 0.f;
  for (int i0 = j0; i0 < Tn; i0 += R) {
    __syncwarp();
    for (int e = lane; e < R * HS; e += 32) {
      const int r = e / HS, d = e % HS, i = i0 + r;
      qs[r][d] = i < Tn ? f32(base[int64_t(i) * row_stride + d]) * scale : 0.f;
      dos[r][d] = i < Tn ? f32(dbase[int64_t(i) * C + d]) : 0.f;
    }
    if (lane < R && i0 + lane < Tn) {
      lse_s[lane] = lse[int64_t(bh) * Tn + i0 + lane];
      delta_s[lane] = delta[int64_t(bh) * Tn + i0 + lane];
    }
    __syncwarp();
    if (G == 1 && !active) continue;
    const int rmax = min(R, Tn - i0);
    for (int r = 0; r < rmax; ++r) {
      // causal: query i sees key j only if j <= i (checked before the dot
      // products at one lane per row, after the group's sums otherwise)
      if (G == 1 && i0 + r < j) continue;
      float s = 0.f, dp = 0.f;
#pragma unroll
      for (int k = 0; k < D; ++k) {
        s += qs[r][k * G + part] * kown[row][k * G + part];
        dp += dos[r][k * G + part] * vown[row][k * G + part];
      }
      s = group_sum<G>(s);
      dp = group_sum<G>(dp);
      if (G > 1 && (i0 + r < j || !active)) continue;
      const float p = expf(s - lse_s[r]);
      const float ds = p * (dp - delta_s[r]);
#pragma unroll
      for (int k = 0; k < D; ++k) {
        dv[k] += p * dos[r][k * G + part];
        dk[k] += ds * qs[r][k * G + part];  // qs already carries the 1/sqrt(hs) scale
      }
    }
  }
  if (!active) return;
  T* dst = dqkv + (int64_t(b) * Tn + j) * row_stride + int64_t(h) * HS;
#pragma unroll
  for (int k = 0; k < D; ++k) {
    dst[C + k * G + part] = store<T>(dk[k]);
    dst[2 * C + k * G + part] = store<T>(dv[k]);
  }
}

// dq. Block: one warp, kRowsPerWarp query rows of one (b, h) (a group of
// kLanesPerRow lanes per query row). Key tiles of as many rows from 0 to the
// query tile's end.
template <typename T, int HS>
__global__ void __launch_bounds__(32) attention_dq_kernel(T* dqkv, const T* dout, const T* qkv, const float* lse,
                                                          const float* delta, int Tn, int C, int NH, float scale) {
  constexpr int G = kLanesPerRow<HS>, R = kRowsPerWarp<HS>, D = HS / G;
  static_assert(kSimtHeadSize<HS>, "a row's elements split evenly over a power-of-two group of lanes");
  __shared__ float qown[R][HS + G];
  __shared__ float doown[R][HS + G];
  __shared__ float ks[R][HS];
  __shared__ float vs[R][HS];
  const int bh = blockIdx.y, b = bh / NH, h = bh % NH, lane = threadIdx.x;
  const int row = lane / G, part = lane % G;
  const int i0 = blockIdx.x * R, i = i0 + row;
  const int64_t row_stride = 3 * int64_t(C);
  const T* base = qkv + int64_t(b) * Tn * row_stride + int64_t(h) * HS;
  const T* dbase = dout + int64_t(b) * Tn * C + int64_t(h) * HS;
  const bool active = i < Tn;
  for (int e = lane; e < R * HS; e += 32) {
    const int r = e / HS, d = e % HS, ir = i0 + r;
    qown[r][d] = ir < Tn ? f32(base[int64_t(ir) * row_stride + d]) * scale : 0.f;
    doown[r][d] = ir < Tn ? f32(dbase[int64_t(ir) * C + d]) : 0.f;
  }
  const float my_lse = active ? lse[int64_t(bh) * Tn + i] : 0.f;
  const float my_delta = active ? delta[int64_t(bh) * Tn + i] : 0.f;
  float dq[D];
#pragma unroll
  for (int k = 0; k < D; ++k) dq[k] = 0.f;
  const int last = min(Tn - 1, i0 + R - 1);
  for (int j0 = 0; j0 <= last; j0 += R) {
    __syncwarp();
    for (int e = lane; e < R * HS; e += 32) {
      const int r = e / HS, d = e % HS, j = j0 + r;
      ks[r][d] = j < Tn ? f32(base[int64_t(j) * row_stride + C + d]) : 0.f;
      vs[r][d] = j < Tn ? f32(base[int64_t(j) * row_stride + 2 * C + d]) : 0.f;
    }
    __syncwarp();
    if (G == 1 && !active) continue;
    const int rmax = active ? min(R, i - j0 + 1) : 0;
    const int rend = G == 1 ? rmax : min(R, last - j0 + 1);  // the warp's last row's, if grouped
    for (int r = 0; r < rend; ++r) {
      float s = 0.f, dp = 0.f;
#pragma unroll
      for (int k = 0; k < D; ++k) {
        s += qown[row][k * G + part] * ks[r][k * G + part];
        dp += doown[row][k * G + part] * vs[r][k * G + part];
      }
      s = group_sum<G>(s);
      dp = group_sum<G>(dp);
      if (r >= rmax) continue;
      const float ds = expf(s - my_lse) * (dp - my_delta);
#pragma unroll
      for (int k = 0; k < D; ++k) dq[k] += ds * ks[r][k * G + part];
    }
  }
  if (!active) return;
  T* dst = dqkv + (int64_t(b) * Tn + i) * row_stride + int64_t(h) * HS;
#pragma unroll
  for (int k = 0; k < D; ++k) dst[k * G + part] = store<T>(dq[k] * scale);
}

// Launch shapes, shared by attention.cu and the emulated test.
template <int HS>
inline dim3 forward_grid(int64_t B, int64_t T, int64_t NH) {
  const int64_t rows_per_block = kRowsPerWarp<HS> * kFwdWarps;
  return dim3(unsigned((T + rows_per_block - 1) / rows_per_block), unsigned(B * NH));
}
template <int HS>
inline dim3 backward_grid(int64_t B, int64_t T, int64_t NH) {
  return dim3(unsigned((T + kRowsPerWarp<HS> - 1) / kRowsPerWarp<HS>), unsigned(B * NH));
}
constexpr int kDeltaThreads = 256;
template <typename T, int HS>
inline dim3 delta_grid(int64_t rows) {
  return dim3(blocks_for(rows, kDeltaThreads / kDeltaLanes<T, HS>));
}

}  // namespace gpt::cuda::detail::simt
